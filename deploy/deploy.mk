# deploy/: Prometheus alert rules, Grafana dashboard, Kubernetes manifests.
# Included by the Makefile; `make help` lists these targets too.
GO ?= go
TOOLS ?= $(CURDIR)/.bin
PROMTOOL := $(TOOLS)/promtool

# promtool, pinned. deploy/install-promtool.sh takes Debian bookworm's
# prometheus package at exactly this version and extracts its promtool into
# .bin/ (seconds), else builds Prometheus' promtool at PROMTOOL_GO_VERSION
# from deploy/tools/go.mod (minutes). PROMTOOL_FROM=source forces the build.
PROMTOOL_DEB_VERSION := 2.42.0+ds-5+deb12u1
PROMTOOL_GO_VERSION := v0.309.1

.PHONY: promtool
promtool: ## Install the pinned promtool into .bin/ (skipped when it is already there).
	@PROMTOOL_DEB_VERSION='$(PROMTOOL_DEB_VERSION)' PROMTOOL_GO_VERSION='$(PROMTOOL_GO_VERSION)' GO='$(GO)' \
	  bash deploy/install-promtool.sh '$(PROMTOOL)'

.PHONY: deploy-test
deploy-test: promtool ## Check and unit-test the alert rules with promtool, then run the deploy/ Go tests.
	$(PROMTOOL) check rules deploy/prometheus/alerts.yaml
	$(PROMTOOL) test rules deploy/prometheus/alerts_test.yaml
	PROMTOOL='$(PROMTOOL)' $(GO) test -count=1 ./deploy/...
