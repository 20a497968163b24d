# shardlimit — `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/bin
TOOLS := $(CURDIR)/.bin
export PATH := $(TOOLS):$(PATH)

# Pinned tool versions, installed into .bin/ by `make tools` (grpcurl alone
# by `make grpcurl`).
BUF_VERSION := v1.75.0
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
GRPCURL_VERSION := v1.9.4
# protoc-gen-grpc-gateway and protoc-gen-openapiv2: the HTTP/JSON API's
# gateways and OpenAPI document; the same version as the runtime in go.mod.
GRPC_GATEWAY_VERSION := v2.29.0
# protoc-gen-go-vtproto: planetscale/vtprotobuf's fast marshal/unmarshal
# (shard/rpc/vtcodec); the same version as the module in go.mod.
VTPROTO_VERSION := v0.6.1-0.20240319094008-0393e58bdf10

# Packages whose tests share memory across goroutines run under -race;
# deploy/ runs under deploy-test (deploy/deploy.mk), with promtool. The
# fault suite (cmd/faults) drives processes and runs without -race, as does
# the robustness suite (cmd/robustness/...: its short form, fixed seeds, and
# the unit tests of its checker, schedule and hosts).
RACE_PKGS := ./shard/... ./router/... ./rebalance/... ./cmd/bench/... ./cmd/shardlimit/... ./cmd/internal/...

# Fuzz targets, as package:Target. `make test` runs their seed corpora
# (each package's testdata/fuzz/ and its f.Add seeds) as plain tests, with
# no random exploration, so it gives the same answer on every run; every
# target's package must be among RACE_PKGS (make test checks). `make fuzz`
# explores for FUZZTIME each; a failing input it finds is written to
# testdata/fuzz/ and, once fixed, committed there as a seed.
FUZZ_TARGETS := \
	./router/rules:FuzzParse \
	./router/request:FuzzValidate \
	./router/envoy:FuzzValidate \
	./router/envoy:FuzzMatch \
	./router/envoy/envoyconfig:FuzzConvert \
	./shard/member:FuzzDecode \
	./shard/mapstore:FuzzDecode \
	./shard/limiter:FuzzDecide \
	./shard/limiter:FuzzDecideLog
FUZZTIME ?= 2m

.DEFAULT_GOAL := help

include deploy/deploy.mk

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# Stamped into the binary (shardlimit version, shardlimit_build_info, the
# shards' member records). Outside git both are empty, and the binary
# reports the build info's module version, else "dev".
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.revision=$(REVISION)

.PHONY: build
build: ## Build bin/shardlimit, stamped with `git describe` (bin/shardlimit version).
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/shardlimit ./cmd/shardlimit

.PHONY: run
run: build ## Build and start a local cluster: embedded etcd, 3 shards, a router and a rebalance instance.
	$(BIN)/shardlimit dev

.PHONY: test
# The -timeout values are hang guards, not expectations: a package of
# cluster tests takes 1-4 min on a quiet machine and must still pass at
# load 30-40 (other suites, a dev cluster under bench, a CPU hog).
test: promtool net-tools ## Run every test: gofmt, vet, unit and cluster tests with -race (fuzz seed corpora included, no random exploration), the hand-off simulation's fixed seeds, the fault suite's and the robustness suite's short forms (as root), alert rules, dashboard, manifests.
	@fmt=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.bin/*')); \
	  if [ -n "$$fmt" ]; then echo "gofmt would change:"; echo "$$fmt"; exit 1; fi
	$(GO) vet ./...
	@race=$$($(GO) list $(RACE_PKGS)) && fuzz=$$($(GO) list $(sort $(foreach t,$(FUZZ_TARGETS),$(firstword $(subst :, ,$(t)))))) || exit 1; \
	  missing=$$(comm -13 <(sort <<<"$$race") <(sort <<<"$$fuzz")); \
	  if [ -n "$$missing" ]; then echo "fuzz targets whose seed corpora make test would not run (add them to RACE_PKGS):"; echo "$$missing"; exit 1; fi
	$(GO) test -race -count=1 -timeout 15m $(RACE_PKGS)
	$(GO) test -count=1 -timeout 5m -run 'TestFixedSeeds|TestOverlapSeeds|TestCutSeeds|TestRegressions|TestDeterministic' ./shard/partition/sim
	$(GO) test -count=1 -timeout 10m ./cmd/faults ./cmd/robustness/...
	$(MAKE) --no-print-directory deploy-test

# iptables and iproute2, pinned: the fault suite (cmd/faults) cuts a shard
# off the network with an iptables rule on loopback, and the robustness
# suite's hosts are network namespaces (cmd/robustness/netns). Debian
# packages, installed as root (make test, and so CI, runs as root), each
# left alone when that version is already there; not root, nothing is
# installed and the tests that cut links skip.
NET_TOOLS := iptables=1.8.9-2 iproute2=6.1.0-3

.PHONY: net-tools
net-tools: ## Install the pinned iptables and iproute2 Debian packages (the fault suite and the robustness hosts cut links with them, as root; skipped when installed or not root).
	@for p in $(NET_TOOLS); do \
	  if [ "$$(dpkg-query -W -f='$${Version}' "$${p%%=*}" 2>/dev/null)" = "$${p#*=}" ]; then continue; fi; \
	  if [ "$$(id -u)" != 0 ]; then echo "make net-tools: not root, so $$p is not installed (the tests that cut links skip)"; continue; fi; \
	  echo "installing $$p (Debian package)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -q "$$p" >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null && apt-get install -y -q "$$p" >/dev/null; } || exit 1; \
	done

.PHONY: fuzz
# Random exploration, kept out of `make test`. A fuzz run fails when it found
# an input (it writes it to testdata/fuzz/ and says "Failing input written
# to"): then it prints the input, the command that replays it and the path
# to commit once the bug is fixed, so that every `go test` runs it as a seed.
# It also fails for any reason it does not name. The Go fuzzing engine
# sometimes ends a run at -fuzztime with "context deadline exceeded", or
# loses a worker, without any input (golang/go#51484, #56238): such a run is
# reported, whole, and does not fail. The seed corpora run as plain tests in
# every `go test` either way.
fuzz: ## Explore every fuzz target for FUZZTIME each (default 2m; not part of make test, which runs the seed corpora); prints any input found, to fix and commit.
	@set -u; out=$$(mktemp); trap 'rm -f "$$out"' EXIT; for t in $(FUZZ_TARGETS); do \
	  echo "fuzz $${t%%:*} $${t##*:} for $(FUZZTIME)"; \
	  if $(GO) test -run '^$$' -fuzz "^$${t##*:}\$$" -fuzztime $(FUZZTIME) "$${t%%:*}" >"$$out" 2>&1; then tail -n 3 "$$out"; continue; fi; \
	  cat "$$out"; \
	  if found=$$(grep -o 'testdata/fuzz/[^ ]*' "$$out" | head -n 1) && [ -n "$$found" ]; then \
	    echo "fuzz $${t##*:}: found an input, $${t%%:*}/$$found:"; cat "$${t%%:*}/$$found"; \
	    echo "replay it: $(GO) test -run '^$${t##*:}/$${found##*/}\$$' $${t%%:*}"; \
	    echo "fix the bug, then commit it as a seed: git add $${t%%:*}/$$found"; exit 1; fi; \
	  if ! grep -q 'Failing input written to' "$$out" && grep -Eq 'context deadline exceeded|fuzzing process hung or terminated unexpectedly' "$$out"; then \
	    echo "fuzz $${t##*:}: the fuzzing engine ended without finding an input (golang/go#51484, #56238); not a failure"; continue; fi; \
	  exit 1; \
	done

.PHONY: bench
bench: build ## Run the benchmark table against dev clusters (shardlimit bench table; a few minutes; not part of test).
	$(BIN)/shardlimit bench table

.PHONY: bench-fleet
bench-fleet: build ## Measure a fleet on this machine: 8/16/32/64 shards and 8 routers started, etcd at steady state, 20 membership changes (shardlimit bench fleet; about 10 minutes; not part of test).
	$(BIN)/shardlimit bench fleet

.PHONY: faults
faults: ## Run the full fault suite against real processes (a few minutes; make test runs its short form; FAULTS_FLAGS=-faults.deadline=200ms on a busy machine).
	$(GO) test -count=1 -timeout 20m -v -run TestFaults ./cmd/faults -faults.full $(FAULTS_FLAGS)

# The robustness suite (cmd/robustness, issue 24): seeded, randomized fault
# schedules against a cluster in network namespaces, every answer checked.
# ROBUSTNESS_TIME is the total length of the schedules, shared by the seeds;
# ROBUSTNESS_SEEDS is a comma-separated list, or random (one seed drawn
# and printed); ROBUSTNESS_FLAGS=-robustness.apart=5s runs one fault at a
# time, 5 s after the previous heal, to measure each fault type's recovery
# alone. make test runs its short form (fixed seeds and the
# regression tests, about 4 minutes). A seed that finds a bug gets a target of its own below.
ROBUSTNESS_TIME ?= 10m
ROBUSTNESS_SEEDS ?= random
ROBUSTNESS_TIMEOUT ?= 3h
.PHONY: robustness
robustness: net-tools ## Run the randomized robustness suite as root (ROBUSTNESS_TIME=10m, ROBUSTNESS_SEEDS=random or 1,2,3; the seed is printed; reports of violations go to $TMPDIR; make robustness-seed-N reruns one seed).
	$(GO) test -count=1 -timeout $(ROBUSTNESS_TIMEOUT) -v -run TestRobustness ./cmd/robustness -robustness.seeds=$(ROBUSTNESS_SEEDS) -robustness.time=$(ROBUSTNESS_TIME) $(ROBUSTNESS_FLAGS)

# robustness-seed-N reruns seed N's schedule (for ROBUSTNESS_TIME, 2m
# unless set: a longer time only adds steps after the same ones).
robustness-seed-%: net-tools ## Rerun one seed of the robustness suite: make robustness-seed-42 (ROBUSTNESS_TIME, default 2m).
	$(GO) test -count=1 -timeout $(ROBUSTNESS_TIMEOUT) -v -run TestRobustness ./cmd/robustness -robustness.seeds=$* -robustness.time=$(if $(filter command line environment,$(origin ROBUSTNESS_TIME)),$(ROBUSTNESS_TIME),2m) $(ROBUSTNESS_FLAGS)

# Regressions the robustness suite found, each rerun from its seed (make
# test's short form runs them too):
#   robustness-split: seed 8 splits [shard-2 router-2] from the rest past the
#   lease; the rest took shard-2's partitions over from zero while router-2
#   still had shard-2 decide them: two deciders for one partition, users
#   past their limit (issue 24). Fixed by the shards' lease guard
#   (shard/leaseguard.go): past its confirmed lease, a shard that a peer
#   does not answer stops deciding.
.PHONY: robustness-split
robustness-split: ## Rerun the robustness suite's seed 8 (a split past the lease, which found two deciders for one partition; fixed by the lease guard).
	$(MAKE) robustness-seed-8 ROBUSTNESS_TIME=8s

#   robustness-takeback: seed 50 cut shard-1 off from etcd past its lease
#   while shard-2 joined. shard-2 took over part of shard-1's partitions
#   with their counters mid-join, then forgot them as the join ended (its
#   table was read before): users past their limit. And shard-1, still
#   seeing itself a member, took its takers' partitions back, fencing them
#   where the routers sent their checks: a third of the users answered by
#   policy until the heal. Fixed in shard/lifecycle.go (a join forgets only
#   what the table it follows does not give it either) and
#   shard/takeover.go (heal takes back only what etcd confirms). Its test
#   scripts the cut and the join rather than rerunning the seed, and
#   asserts what the seed's run only showed in its report.
#   robustness-etcd-pause: seed 555 stopped etcd past the lease; on going
#   on it expired every lease at once, and the first shard to join again
#   took every partition, none of which had an owner, from zero, though
#   the others held their counters: keys past their limit. Fixed in
#   shard/lifecycle.go (a join pulls ownerless partitions from the shards
#   that last owned them).
.PHONY: robustness-etcd-pause
robustness-etcd-pause: net-tools ## Rerun the regression of etcd paused past the lease (found by seed 555: every lease lost at once, and partitions with no owner counted from zero).
	$(GO) test -count=1 -timeout 10m -v -run TestEtcdPausedPastTheLeaseLosesNothing ./cmd/robustness

.PHONY: robustness-takeback
robustness-takeback: net-tools ## Rerun the regression of a shard cut off from etcd during a join (found by seed 50: a join forgot counters taken over meanwhile; the cut shard took its takers' partitions back).
	$(GO) test -count=1 -timeout 10m -v -run TestShardCutFromEtcdMidJoinLosesNothing ./cmd/robustness

.PHONY: robustness-limit-lowered
robustness-limit-lowered: net-tools ## Rerun seed 31337 one fault at a time (it found a bucket whose lowered limit freed a hit at once; fixed, and held by shard/limiter's TestALowerLimitKeepsTheBacklog; about 15 minutes).
	$(MAKE) robustness-seed-31337 ROBUSTNESS_TIME=8m ROBUSTNESS_FLAGS=-robustness.apart=5s

.PHONY: robustness-drain-lost-lease
robustness-drain-lost-lease: ## Rerun the regression of a drain after a lost lease (found by seeds 31337 and 777: the takers' partitions were left undecided for 5-10 s).
	$(GO) test -count=1 -timeout 10m -v -run TestADrainAfterALostLeaseLeavesTheTakersDeciding ./router/clustertest

# The hand-off protocol's deterministic simulation (shard/partition/sim,
# issue 25): SIM_TIME of seeds from SIM_FROM, SIM_STEPS events each.
# make test runs its first 1000 seeds and regressions (a few seconds).
# SIM_FLAGS=-sim.overlap lets faults and planned changes overlap; make test
# runs its first 1000 seeds too, but for any still open (the package
# documentation says which). SIM_FLAGS=-sim.cuts adds network partitions
# between two shards; make test runs its first 1000 seeds too. Seeds run on
# every CPU.
SIM_TIME ?= 1m
SIM_FROM ?= 1000
SIM_STEPS ?= 2000
.PHONY: sim
sim: ## Run the hand-off protocol's deterministic simulation for SIM_TIME (default 1m) of seeds from SIM_FROM, SIM_STEPS events each (SIM_FLAGS=-sim.overlap: overlapping faults; -sim.cuts: network partitions between shards); a failing seed prints its trace and the command that replays it.
	$(GO) test -count=1 -v -run 'TestSim$$' -timeout 0 ./shard/partition/sim -sim.time $(SIM_TIME) -sim.from $(SIM_FROM) -sim.steps $(SIM_STEPS) $(SIM_FLAGS)

.PHONY: bench-shard
bench-shard: ## Run the Go benchmarks of the shard engine.
	$(GO) test -run '^$$' -bench . -benchmem -cpu 1,2 ./shard/...

.PHONY: tools grpcurl
tools: $(TOOLS)/buf $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc $(TOOLS)/protoc-gen-go-vtproto $(TOOLS)/protoc-gen-grpc-gateway $(TOOLS)/protoc-gen-openapiv2 $(TOOLS)/grpcurl ## Install the pinned tools into .bin/: buf, the protoc plugins (for make proto) and grpcurl.

grpcurl: $(TOOLS)/grpcurl ## Install only the pinned grpcurl into .bin/ (the README's grpcurl examples).

$(TOOLS)/buf:
	GOBIN=$(TOOLS) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(TOOLS)/protoc-gen-go:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
$(TOOLS)/protoc-gen-go-grpc:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
$(TOOLS)/protoc-gen-go-vtproto:
	GOBIN=$(TOOLS) $(GO) install github.com/planetscale/vtprotobuf/cmd/protoc-gen-go-vtproto@$(VTPROTO_VERSION)
$(TOOLS)/protoc-gen-grpc-gateway:
	GOBIN=$(TOOLS) $(GO) install github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-grpc-gateway@$(GRPC_GATEWAY_VERSION)
$(TOOLS)/protoc-gen-openapiv2:
	GOBIN=$(TOOLS) $(GO) install github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-openapiv2@$(GRPC_GATEWAY_VERSION)
$(TOOLS)/grpcurl:
	GOBIN=$(TOOLS) $(GO) install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)

.PHONY: proto
proto: $(TOOLS)/buf $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc $(TOOLS)/protoc-gen-go-vtproto $(TOOLS)/protoc-gen-grpc-gateway $(TOOLS)/protoc-gen-openapiv2 ## Lint the .proto files and regenerate the Go code, the HTTP gateways and the OpenAPI document.
	cd proto && $(TOOLS)/buf lint && $(TOOLS)/buf generate
	@# The HTTP gateways (proto/gateway/) and the OpenAPI document
	@# (proto/openapi/) come from our image with Envoy's rate limit service
	@# added from go-control-plane (proto/gatewayimage; rules in proto/http.yaml).
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && cd proto && \
	  $(TOOLS)/buf build -o "$$tmp/shardlimit.binpb" && \
	  $(GO) run ./gatewayimage "$$tmp/shardlimit.binpb" "$$tmp/http.binpb" && \
	  $(TOOLS)/buf generate "$$tmp/http.binpb" --template buf.gen.http.yaml \
	    --path shardlimit/v1/ratelimit.proto --path envoy/service/ratelimit/v3/rls.proto

.PHONY: clean
clean: ## Remove build outputs.
	rm -rf $(BIN)
