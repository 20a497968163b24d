#!/usr/bin/env bash
# Installs the pinned promtool at DEST (default .bin/promtool), unless the
# promtool already there reports the pinned version. Called by
# `make promtool` (deploy/deploy.mk), which sets the pins.
#
# Two sources, the fast one first:
#   debian  the promtool of Debian's prometheus package at exactly
#           $PROMTOOL_DEB_VERSION, fetched with `apt-get download` and
#           extracted (nothing is installed system-wide, no service starts):
#           about 3 seconds;
#   source  `go build` of Prometheus $PROMTOOL_GO_VERSION's cmd/promtool,
#           pinned with its dependencies by deploy/tools/go.mod and go.sum:
#           about 7 minutes on 2 cores with a cold build cache.
# PROMTOOL_FROM=debian or =source picks one; by default Debian's is tried
# and the source build is the fallback (no apt, or Debian has moved on from
# the pinned version: then update the pin).
set -euo pipefail

deb_version=${PROMTOOL_DEB_VERSION:?set PROMTOOL_DEB_VERSION}
go_version=${PROMTOOL_GO_VERSION:?set PROMTOOL_GO_VERSION}
from=${PROMTOOL_FROM:-}
go=${GO:-go}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dest=$(realpath -m "${1:-$here/../.bin/promtool}")

current() {
	[[ -x $dest ]] || return 1
	local v
	v=$("$dest" --version 2>&1 | head -1) || return 1
	[[ $v == *"revision: $deb_version)"* || $v == *"version $go_version "* ]]
}

from_debian() {
	command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || {
		echo "promtool: no apt-get/dpkg-deb here" >&2
		return 1
	}
	local tmp
	tmp=$(mktemp -d)
	# apt-get download writes into the current directory.
	if ! (cd "$tmp" && apt-get download -q "prometheus=$deb_version") >"$tmp/log" 2>&1; then
		# A new machine may have no package lists yet, or old ones.
		if [[ $(id -u) == 0 ]]; then
			apt-get update -q >>"$tmp/log" 2>&1 || true
		fi
		if ! (cd "$tmp" && apt-get download -q "prometheus=$deb_version") >>"$tmp/log" 2>&1; then
			echo "promtool: Debian's prometheus=$deb_version is not available:" >&2
			grep -E '^(E|W):' "$tmp/log" >&2 || true
			rm -rf "$tmp"
			return 1
		fi
	fi
	dpkg-deb --fsys-tarfile "$tmp"/prometheus_*.deb | tar -x -O ./usr/bin/promtool >"$tmp/promtool"
	chmod 755 "$tmp/promtool"
	mkdir -p "$(dirname "$dest")"
	mv -f "$tmp/promtool" "$dest"
	rm -rf "$tmp"
}

from_source() {
	echo "promtool: building Prometheus $go_version's promtool from deploy/tools (minutes)" >&2
	local want
	want=$(cd "$here/tools" && "$go" list -m -f '{{.Version}}' github.com/prometheus/prometheus)
	if [[ $want != "$go_version" ]]; then
		echo "promtool: deploy/tools/go.mod pins $want, deploy/deploy.mk $go_version: make them agree" >&2
		return 1
	fi
	mkdir -p "$(dirname "$dest")"
	(cd "$here/tools" && "$go" build -trimpath \
		-ldflags "-X github.com/prometheus/common/version.Version=$go_version" \
		-o "$dest.tmp" github.com/prometheus/prometheus/cmd/promtool)
	mv -f "$dest.tmp" "$dest"
}

if [[ -z $from ]] && current; then
	exit 0
fi
case $from in
debian) from_debian ;;
source) from_source ;;
"") from_debian || from_source ;;
*)
	echo "promtool: PROMTOOL_FROM=$from is not debian or source" >&2
	exit 2
	;;
esac
current || {
	echo "promtool: $dest does not report the pinned version: $("$dest" --version 2>&1 | head -1)" >&2
	exit 1
}
echo "promtool: $("$dest" --version 2>&1 | head -1) at $dest"
