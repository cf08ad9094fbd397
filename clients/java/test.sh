#!/usr/bin/env bash
# Builds the Java client with plain javac/jar and runs its JUnit 5 tests against a real server.
#   clients/java/test.sh path/to/larder [PORTABLE_DIR]
# Needs JDK 17+ and Debian's junit5 and libxerial-sqlite-jdbc-java packages (jars in /usr/share/java,
# or set JAVA_LIBS to a directory holding junit-platform-console-standalone.jar and sqlite-jdbc.jar).
# The jar with the server inside (package.sh) is made of PORTABLE_DIR (scripts/portable's folder), else of
# the binary's own folder when it holds lib/ (a portable build), else of the binary alone.
set -euo pipefail

BINARY=${1:-${LARDER_BINARY:-}}
if [[ -z "$BINARY" || $# -gt 2 ]]; then
    echo "usage: $0 path/to/larder [PORTABLE_DIR]" >&2
    exit 2
fi
if [[ ! -x "$BINARY" ]]; then
    echo "$0: $BINARY is not an executable" >&2
    exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BINARY=$(cd "$(dirname "$BINARY")" && pwd)/$(basename "$BINARY")

LIBS=${JAVA_LIBS:-/usr/share/java}
CONSOLE=$LIBS/junit-platform-console-standalone.jar
SQLITE=$LIBS/sqlite-jdbc.jar
for jar in "$CONSOLE" "$SQLITE"; do
    if [[ ! -f "$jar" ]]; then
        echo "$0: $jar is missing (apt-get install -y junit5 libxerial-sqlite-jdbc-java)" >&2
        exit 2
    fi
done

OUT=$(mktemp -d "${TMPDIR:-/tmp}/larder-java.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
cd "$HERE"

JAVAC=(javac --release 17 -encoding UTF-8 -Xlint:all -Werror)
# The client itself: no dependencies; dev.larder.junit needs the JUnit 5 API only to compile.
JUNIT_JAR="$CONSOLE" ./build.sh "$OUT" >/dev/null
"${JAVAC[@]}" -cp "$OUT/larder-client.jar:$CONSOLE" -d "$OUT/sample" $(find src/sample/java -name '*.java' | sort)
"${JAVAC[@]}" -cp "$OUT/larder-client.jar:$CONSOLE:$SQLITE" -d "$OUT/test" $(find src/test/java -name '*.java' | sort)

# The published jar: the classes and the server.
PORTABLE=${2:-}
if [[ -z "$PORTABLE" ]]; then
    if [[ -d "$(dirname "$BINARY")/lib" ]]; then
        PORTABLE=$(dirname "$BINARY")
    else
        PORTABLE=$OUT/portable
        mkdir -p "$PORTABLE"
        ln -s "$BINARY" "$PORTABLE/larder"
    fi
fi
PACKED=$(JUNIT_JAR="$CONSOLE" ./package.sh "$PORTABLE" "$OUT/dist" | tail -1)

export LARDER_BINARY="$BINARY"
export LARDER_FIXTURES="$REPO/fixtures"
# The tests use their own server; a LARDER_URL/TOKEN from the environment must not leak in.
unset LARDER_URL LARDER_TOKEN LARDER_ARTIFACTS LARDER_MODE

java -Dlarder.test.console="$CONSOLE" \
     -Dlarder.test.defaults="$HERE/../defaults.json" \
     -Dlarder.test.repo="$REPO" \
     -Dlarder.test.client="$OUT/larder-client.jar" \
     -Dlarder.test.sample="$OUT/sample" \
     -Dlarder.test.jar="$PACKED" \
     -jar "$CONSOLE" --disable-banner --details=tree --disable-ansi-colors \
     --class-path "$OUT/test:$OUT/larder-client.jar:$SQLITE" \
     --scan-class-path "$OUT/test" --include-engine=junit-jupiter \
     --fail-if-no-tests
