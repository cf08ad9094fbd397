#!/usr/bin/env bash
# Tests the Go client against a real Larder server, offline:
#   clients/go/test.sh BINARY
# BINARY is the larder executable (e.g. .build/debug/larder); the tests start
# it on a free port with the repository's fixtures/. Needs Go 1.19 or newer
# (Debian: apt-get install golang-go) and nothing else: the client has no
# dependencies, so the module proxy is switched off.
set -euo pipefail
if [ $# -lt 1 ]; then
    echo "usage: $0 LARDER_BINARY" >&2
    exit 2
fi
binary=$1
if [ ! -x "$binary" ]; then
    echo "$0: $binary is not an executable" >&2
    exit 2
fi
# Absolute, since go test runs each package in its own directory.
binary="$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")"
cd "$(dirname "$0")"

export LARDER_BINARY="$binary"
export GOPROXY=off GOSUMDB=off GOFLAGS=-mod=mod GOWORK=off GOTOOLCHAIN=local
# The tests choose their servers and modes themselves (the remote-mode ones
# start a hidden server: ../../Tests/support/hidden-larder).
unset LARDER_URL LARDER_MODE
# A build cache that is writable, whatever HOME is.
cache="${GOCACHE:-$(go env GOCACHE 2>/dev/null || true)}"
if [ -z "$cache" ] || [ "$cache" = off ] || ! mkdir -p "$cache" 2>/dev/null || [ ! -w "$cache" ]; then
    cache="${TMPDIR:-/tmp}/larder-go-cache-$(id -u)"
    mkdir -p "$cache"
fi
export GOCACHE="$cache"

go version
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
    echo "gofmt: not formatted: $unformatted" >&2
    exit 1
fi
go vet ./...
for sample in larder/lardertest/testdata/*/; do
    (cd "$sample" && go vet ./...)
done
go test -count=1 -timeout 5m ./...
