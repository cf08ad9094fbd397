#!/usr/bin/env bash
# Builds larder-client.jar with plain javac and jar (JDK 17+), no Maven needed.
#   clients/java/build.sh [OUTDIR]        (default: clients/java/build)
# The JUnit 5 extension (dev.larder.junit) needs the JUnit 5 API to compile: it is taken from
# $JUNIT_JAR, else Debian's /usr/share/java/junit-jupiter-api.jar (apt-get install junit5).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${1:-$HERE/build}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
JUNIT=${JUNIT_JAR:-/usr/share/java/junit-jupiter-api.jar:/usr/share/java/junit-platform-commons.jar:/usr/share/java/apiguardian-api.jar:/usr/share/java/opentest4j.jar}
rm -rf "$OUT/classes"
cd "$HERE"
javac --release 17 -encoding UTF-8 -Xlint:all -Werror -cp "$JUNIT" -d "$OUT/classes" $(find src/main/java -name '*.java' | sort)
jar --create --file "$OUT/larder-client.jar" -C "$OUT/classes" .
echo "$OUT/larder-client.jar"
