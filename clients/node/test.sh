#!/usr/bin/env bash
# Runs the Node client's tests against the real server.
# Usage: clients/node/test.sh path/to/larder
#   LARDER_PORTABLE=DIR (a folder made by scripts/portable): package.test.js
#   packs that server instead of a stand-in holding a copy of path/to/larder.
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
if ! command -v tsc >/dev/null; then
    echo "$0: tsc is not on PATH; test/types.test.js checks the typings with it: install Debian's node-typescript (scripts/setup does)" >&2
    exit 2
fi
binary=$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")
if [ -n "${LARDER_PORTABLE:-}" ]; then
    LARDER_PORTABLE=$(cd "$LARDER_PORTABLE" && pwd)
    export LARDER_PORTABLE
fi
cd "$(dirname "$0")"
LARDER_BINARY=$binary exec node --test --test-reporter=spec test/defaults.test.js test/types.test.js test/client.test.js test/build.test.js \
    test/helper.test.js test/appcheck.test.js test/remote.test.js test/up.test.js test/retry.test.js test/package.test.js \
    test/lean.test.js test/background.test.js
