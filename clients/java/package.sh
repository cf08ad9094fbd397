#!/usr/bin/env bash
# Builds the jar that is published: the client's classes with the larder server inside, with plain
# javac and jar (JDK 17+), offline.
#
#   clients/java/package.sh PORTABLE_DIR DIST_DIR
#
# PORTABLE_DIR is what scripts/portable makes (larder, lib/*.so*, licenses/). DIST_DIR receives
#
#   larder-client-VERSION.jar           the classes, and the server as resources:
#       dev/larder/server/PLATFORM/larder, .../lib/*.so*, .../INDEX (version, and each file's mode,
#       size and SHA-256), unpacked once per version into ${XDG_CACHE_HOME:-~/.cache}/larder/VERSION/PLATFORM/
#       META-INF/LICENSE, META-INF/NOTICE (the repository's), META-INF/licenses/ (the server's libraries')
#   larder-client-VERSION-sources.jar, larder-client-VERSION-javadoc.jar
#   larder-client-VERSION.pom            pom.xml, for publishing beside the jar
#
# VERSION is the repository's VERSION file (pom.xml must say the same: scripts/version --check).
# PLATFORM (linux-x86_64, linux-aarch64) is read from the binary; JUNIT_JAR as for build.sh.
set -euo pipefail
if [[ $# -ne 2 ]]; then
    echo "usage: $0 PORTABLE_DIR DIST_DIR" >&2
    exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PORTABLE=$(cd "$1" && pwd)
mkdir -p "$2"
DIST=$(cd "$2" && pwd)

VERSION=$(tr -d '[:space:]' < "$REPO/VERSION")
POM_VERSION=$(sed -n '/<artifactId>larder-client<\/artifactId>/{n;s/.*<version>\(.*\)<\/version>.*/\1/p;q}' "$HERE/pom.xml")
if [[ "$POM_VERSION" != "$VERSION" ]]; then
    echo "$0: VERSION says $VERSION but clients/java/pom.xml says $POM_VERSION (scripts/version --set $VERSION)" >&2
    exit 1
fi
if [[ ! -x "$PORTABLE/larder" ]]; then
    echo "$0: $PORTABLE/larder is not an executable (make the folder with scripts/portable)" >&2
    exit 1
fi
for f in LICENSE NOTICE; do
    if [[ ! -f "$REPO/$f" ]]; then
        echo "$0: $REPO/$f is missing; the jar must carry it" >&2
        exit 1
    fi
done

# The platform, from the ELF header: its magic, then e_machine (offset 18).
if [[ "$(head -c 4 "$PORTABLE/larder" | od -An -c | tr -d ' ')" != '177ELF' ]]; then
    echo "$0: $PORTABLE/larder is not an ELF binary (only Linux servers are packed)" >&2
    exit 1
fi
case "$(od -An -tx1 -j18 -N2 "$PORTABLE/larder" | tr -d ' \n')" in
    3e00) PLATFORM=linux-x86_64 ;;
    b700) PLATFORM=linux-aarch64 ;;
    *) echo "$0: $PORTABLE/larder is for a machine this script does not know" >&2; exit 1 ;;
esac

STAGE=$(mktemp -d "${TMPDIR:-/tmp}/larder-java-package.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
"$HERE/build.sh" "$STAGE/build" >/dev/null
CLASSES=$STAGE/build/classes

SERVER=$CLASSES/dev/larder/server/$PLATFORM
mkdir -p "$SERVER"
cp "$PORTABLE/larder" "$SERVER/larder"
if [[ -d "$PORTABLE/lib" ]]; then
    mkdir -p "$SERVER/lib"
    cp -L "$PORTABLE"/lib/*.so* "$SERVER/lib/"
fi
{
    echo "# The larder server packed in larder-client $VERSION for $PLATFORM: unpacked once per version into"
    echo "# \${XDG_CACHE_HOME:-~/.cache}/larder/$VERSION/$PLATFORM/ and run from there. file MODE SIZE SHA-256 PATH"
    echo "version $VERSION"
    (cd "$SERVER" && find . -type f ! -name INDEX | sed 's|^\./||' | LC_ALL=C sort | while read -r f; do
        mode=0644
        [[ "$f" == larder ]] && mode=0755
        echo "file $mode $(stat -c %s "$f") $(sha256sum "$f" | cut -d' ' -f1) $f"
    done)
} > "$STAGE/INDEX"
mv "$STAGE/INDEX" "$SERVER/INDEX"

mkdir -p "$CLASSES/META-INF"
cp "$REPO/LICENSE" "$REPO/NOTICE" "$CLASSES/META-INF/"
if [[ -d "$PORTABLE/licenses" ]]; then
    cp -r "$PORTABLE/licenses" "$CLASSES/META-INF/licenses"
fi
cat > "$STAGE/MANIFEST.MF" <<EOF
Implementation-Title: larder-client
Implementation-Version: $VERSION
Implementation-Vendor: the Larder authors
Automatic-Module-Name: dev.larder
EOF

JAR=$DIST/larder-client-$VERSION.jar
rm -f "$JAR"
jar --create --file "$JAR" --manifest "$STAGE/MANIFEST.MF" -C "$CLASSES" .

mkdir -p "$STAGE/sources/META-INF"
cp "$REPO/LICENSE" "$REPO/NOTICE" "$STAGE/sources/META-INF/"
rm -f "$DIST/larder-client-$VERSION-sources.jar"
jar --create --file "$DIST/larder-client-$VERSION-sources.jar" -C "$HERE/src/main/java" . -C "$STAGE/sources" .
JUNIT=${JUNIT_JAR:-/usr/share/java/junit-jupiter-api.jar:/usr/share/java/junit-platform-commons.jar:/usr/share/java/apiguardian-api.jar:/usr/share/java/opentest4j.jar}
javadoc -quiet -Xdoclint:none -cp "$JUNIT" -d "$STAGE/javadoc" -sourcepath "$HERE/src/main/java" -subpackages dev.larder >/dev/null
cp "$REPO/LICENSE" "$REPO/NOTICE" "$STAGE/javadoc/"
rm -f "$DIST/larder-client-$VERSION-javadoc.jar"
jar --create --file "$DIST/larder-client-$VERSION-javadoc.jar" -C "$STAGE/javadoc" .
cp "$HERE/pom.xml" "$DIST/larder-client-$VERSION.pom"
echo "$JAR"
