#!/usr/bin/env bash
# Makes the npm package larder-sqlite: the client (index.js, testing.js, their
# types, README.md), the repository's LICENSE and NOTICE, and the server for
# one platform, a folder made by scripts/portable, under server/PLATFORM/
# (the binary, its lib/ and, when the folder has them, its licenses/). The
# test helper runs that binary when no URL and no other binary is given.
#
#   clients/node/package.sh PORTABLE_DIR DIST_DIR [PLATFORM]
#
#   DIST_DIR/larder-sqlite-VERSION.tgz
#
# PLATFORM is Node's process.platform-process.arch (linux-x64, linux-arm64);
# by default read from the binary's ELF header. VERSION is the repository's
# VERSION file, which package.json must say too (scripts/version --set).
# Runs `npm pack` on a staged copy, offline: the package has no dependencies.
set -euo pipefail
fail() { echo "package.sh: $*" >&2; exit 1; }
[ $# -ge 2 ] && [ $# -le 3 ] || { echo "usage: $0 PORTABLE_DIR DIST_DIR [PLATFORM]" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
[ -d "$1" ] || fail "$1 is not a folder"
portable=$(cd "$1" && pwd)
mkdir -p "$2"
dist=$(cd "$2" && pwd)

version=$(tr -d '[:space:]' < "$repo/VERSION")
says=$(node -p 'require(process.argv[1]).version' "$here/package.json")
[ "$says" = "$version" ] || fail "package.json says $says, VERSION $version: run scripts/version --set $version"

[ -f "$portable/larder" ] && [ -x "$portable/larder" ] || fail "$portable/larder is not an executable"
[ -d "$portable/lib" ] || fail "$portable has no lib/ (make it with scripts/portable)"
for file in LICENSE NOTICE; do [ -f "$repo/$file" ] || fail "$repo/$file is missing"; done

if [ $# -eq 3 ]; then
    platform=$3
else
    # ELF: the magic, then EI_CLASS 2 (64-bit) at 4; e_machine (little-endian) at 18.
    header=$(od -An -tu1 -N20 "$portable/larder" | tr -s ' \n' ' ')
    read -r -a bytes <<< "$header"
    [ "${bytes[0]:-}" = 127 ] && [ "${bytes[1]:-}" = 69 ] && [ "${bytes[2]:-}" = 76 ] && [ "${bytes[3]:-}" = 70 ] \
        || fail "$portable/larder is not an ELF binary; name its platform: $0 PORTABLE_DIR DIST_DIR PLATFORM"
    machine=$(( bytes[18] + 256 * bytes[19] ))
    case "${bytes[4]}:$machine" in
        2:62) platform=linux-x64 ;;
        2:183) platform=linux-arm64 ;;
        *) fail "$portable/larder: ELF class ${bytes[4]}, machine $machine: name its platform as a third argument" ;;
    esac
fi
[[ $platform =~ ^[a-z0-9]+-[a-z0-9]+$ ]] || fail "platform '$platform' is not PLATFORM-ARCH (linux-x64)"
[ -d "$portable/licenses" ] || echo "package.sh: warning: $portable has no licenses/ (the libraries' licence texts NOTICE promises)" >&2

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
pkg=$stage/package
mkdir -p "$pkg/server/$platform"
cp "$here"/index.js "$here"/index.d.ts "$here"/testing.js "$here"/testing.d.ts "$here"/package.json "$pkg/"
cp "$repo/LICENSE" "$repo/NOTICE" "$pkg/"
# The README's links into the repository, as links to it on GitHub.
sed -e 's#](\.\./\.\./#](https://github.com/larder-dev/larder/blob/HEAD/#g' \
    -e 's#](\.\./#](https://github.com/larder-dev/larder/blob/HEAD/clients/#g' \
    "$here/README.md" > "$pkg/README.md"
cp -R "$portable/." "$pkg/server/$platform/"
chmod -R u+rwX,go+rX,go-w "$pkg"
chmod 0755 "$pkg/server/$platform/larder"

rm -f "$dist/larder-sqlite-$version.tgz"
(cd "$pkg" && npm pack --offline --ignore-scripts --silent --pack-destination "$dist" >/dev/null)
tarball=$dist/larder-sqlite-$version.tgz
[ -f "$tarball" ] || fail "npm pack made no $tarball"

# What an install must find: the client, the licence, and the server, executable.
listing=$(tar tzvf "$tarball")
for file in index.js index.d.ts testing.js testing.d.ts package.json README.md LICENSE NOTICE; do
    grep -q " package/$file\$" <<< "$listing" || fail "$tarball lacks $file"
done
grep -Eq "^-rwxr-xr-x .* package/server/$platform/larder\$" <<< "$listing" \
    || fail "$tarball lacks an executable server/$platform/larder"
echo "$tarball ($(stat -c %s "$tarball") bytes, server/$platform)"
