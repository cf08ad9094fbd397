#!/usr/bin/env bash
# Builds the Python package, larder-sqlite, for PyPI:
#
#   clients/python/package.sh PORTABLE_DIR DIST_DIR
#
# PORTABLE_DIR is what `scripts/portable BINARY OUT` makes (the server, and
# the shared libraries it needs past the C library in lib/), all of which
# goes into the platform wheel's larder/_server/. Into DIST_DIR:
#
#   larder_sqlite-V-py3-none-manylinux_2_X_ARCH.whl   the client, the pytest
#       plugin and the server (larder/_server/larder, larder/_server/lib/):
#       `pip install larder-sqlite`, then pytest, and nothing else to install
#   larder_sqlite-V-py3-none-any.whl   the client and plugin alone, for every
#       other platform (a server from LARDER_URL, LARDER_BINARY or PATH)
#   larder_sqlite-V.tar.gz             the sdist
#
# ARCH is the binary's own (x86_64, or aarch64 when run on an arm64 machine
# with an arm64 PORTABLE_DIR); X the newest glibc symbol version that the
# binary or a library in lib/ needs. `auditwheel show` must agree that the
# wheel is consistent with that tag, and a fresh virtual environment that
# installs the wheel must start the server from it, or nothing is written.
#
# The build tools (build, setuptools, wheel, auditwheel), pinned below, live
# in a virtual environment made once under
# ${XDG_CACHE_HOME:-$HOME/.cache}/larder/python-package-tools; nothing but
# PyPI is needed. LICENSE and NOTICE are the repository's top-level ones,
# copied into the build. LARDER_VERBOSE=1 prints what `auditwheel show` says.
set -euo pipefail

TOOLS=(
    "build==1.6.1" "pyproject_hooks==1.3.3" "packaging==26.3"
    "setuptools==84.2.1" "wheel==0.48.0"
    "auditwheel==6.8.2" "pyelftools==0.33"
)

if [ $# -ne 2 ]; then
    echo "usage: clients/python/package.sh PORTABLE_DIR DIST_DIR" >&2
    exit 2
fi
portable=$(cd "$1" && pwd)
mkdir -p "$2"
dist=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

[ -x "$portable/larder" ] && [ -d "$portable/lib" ] || {
    echo "package.sh: $portable is not a folder made by scripts/portable (larder and lib/)" >&2; exit 2; }
for file in LICENSE NOTICE; do
    [ -f "$repo/$file" ] || { echo "package.sh: $repo/$file is missing" >&2; exit 1; }
done
version=$(cat "$repo/VERSION")

# --- the tools, made once ------------------------------------------------------
tools=${XDG_CACHE_HOME:-$HOME/.cache}/larder/python-package-tools
have_tools() {
    "$tools/bin/python" - "${TOOLS[@]}" 2>/dev/null <<'PYTHON'
import importlib.metadata, sys
for pin in sys.argv[1:]:
    name, version = pin.split("==")
    if importlib.metadata.version(name) != version:
        sys.exit(1)
PYTHON
}
. "$repo/scripts/lib/venv.sh"
larder_venv "$tools" "${LARDER_PYTHON:-python3}" "the Python packaging tools" have_tools "${TOOLS[@]}"
flock -u 9
python=$tools/bin/python

work=$(mktemp -d "${TMPDIR:-/tmp}/larder-python-package.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Reproducible archives: every timestamp is the last commit's.
SOURCE_DATE_EPOCH=$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)
export SOURCE_DATE_EPOCH

# --- sdist, and the pure wheel built from it ------------------------------------
mkdir "$work/src"
cp -R "$here/pyproject.toml" "$here/README.md" "$here/src" "$work/src/"
cp "$repo/LICENSE" "$repo/NOTICE" "$work/src/"
find "$work/src" -name __pycache__ -prune -exec rm -rf {} +
"$python" -m build --no-isolation --outdir "$work/out" "$work/src" >"$work/build.log" 2>&1 || {
    cat "$work/build.log" >&2; echo "package.sh: the build failed" >&2; exit 1; }
sdist=$work/out/larder_sqlite-$version.tar.gz
pure=$work/out/larder_sqlite-$version-py3-none-any.whl
[ -f "$sdist" ] && [ -f "$pure" ] || { ls "$work/out" >&2; echo "package.sh: unexpected build output" >&2; exit 1; }

# --- the platform tag: the binary's architecture, the newest glibc it needs ---
tag=$("$python" - "$portable/larder" "$portable"/lib/* <<'PYTHON'
import re, sys
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection

ARCH = {"EM_X86_64": "x86_64", "EM_AARCH64": "aarch64"}
newest, arches = (2, 17), set()  # manylinux_2_17 (manylinux2014) is the oldest tag we write
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        elf = ELFFile(f)
        arches.add(ARCH.get(elf["e_machine"], elf["e_machine"]))
        for section in elf.iter_sections():
            if isinstance(section, GNUVerNeedSection):
                for _, auxiliaries in section.iter_versions():
                    for aux in auxiliaries:
                        m = re.fullmatch(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?", aux.name)
                        if m:
                            newest = max(newest, (int(m.group(1)), int(m.group(2))))
if len(arches) != 1 or next(iter(arches)) not in ARCH.values():
    sys.exit("package.sh: the binary and its libraries are for %s" % ", ".join(sorted(map(str, arches))))
print("manylinux_%d_%d_%s" % (newest[0], newest[1], arches.pop()))
PYTHON
)

# --- the platform wheel: the pure one, with the server inside -----------------
"$python" -m wheel unpack --dest "$work/unpacked" "$pure" >/dev/null
root=$work/unpacked/larder_sqlite-$version
# All of PORTABLE_DIR: the binary, lib/, and what else scripts/portable puts
# beside them (the libraries' licences); only the binary is executable.
mkdir -p "$root/larder/_server"
cp -R "$portable/." "$root/larder/_server/"
find "$root/larder/_server" -type d -exec chmod 0755 {} +
find "$root/larder/_server" -type f -exec chmod 0644 {} +
chmod 0755 "$root/larder/_server/larder"
# Not pure any more (installed to platlib); the tag says which platform.
"$python" - "$root/larder_sqlite-$version.dist-info/WHEEL" "$tag" <<'PYTHON'
import sys
path, tag = sys.argv[1:]
with open(path) as f:
    lines = [line for line in f.read().splitlines() if line.strip() and not line.startswith("Tag:")]
lines = ["Root-Is-Purelib: false" if line.startswith("Root-Is-Purelib:") else line for line in lines]
lines.append("Tag: py3-none-" + tag)
with open(path, "w") as f:
    f.write("\n".join(lines) + "\n")
PYTHON
"$python" -m wheel pack --dest-dir "$work/out" "$root" >/dev/null
platform=$work/out/larder_sqlite-$version-py3-none-$tag.whl
[ -f "$platform" ] || { ls "$work/out" >&2; echo "package.sh: wheel pack made no $platform" >&2; exit 1; }

# auditwheel reads the ELF files as a manylinux checker: the tag must be one it agrees with.
"$tools/bin/auditwheel" show "$platform" >"$work/auditwheel.txt" 2>&1 || {
    cat "$work/auditwheel.txt" >&2; echo "package.sh: auditwheel show failed" >&2; exit 1; }
if ! tr '\n' ' ' <"$work/auditwheel.txt" | grep -q "consistent with the following platform tag: \"$tag\""; then
    cat "$work/auditwheel.txt" >&2
    echo "package.sh: auditwheel does not agree with the tag $tag" >&2
    exit 1
fi

# --- a user's install: a fresh environment, nothing but the wheel ---------------
"$python" -m venv "$work/user"
"$work/user/bin/python" -m pip install --quiet --disable-pip-version-check --no-index "$platform"
mkdir "$work/tmp"
env -u LARDER_URL -u LARDER_BINARY -u LARDER_FIXTURES PATH=/usr/bin:/bin TMPDIR="$work/tmp" VERSION="$version" \
    "$work/user/bin/python" - <<'PYTHON'
import os
import larder
from larder import _up

assert larder.__version__ == os.environ["VERSION"], (larder.__version__, os.environ["VERSION"])
binary = larder.find_binary()
assert binary == _up.SHIPPED_BINARY, "the wheel's binary is not found: %r" % binary
assert os.stat(binary).st_mode & 0o111, "the wheel's binary lost its executable bit"
with larder.Client.for_tests(cwd=os.environ["TMPDIR"]) as client:  # no fixtures folder there
    assert client.health()["status"] == "ok", client.health()
PYTHON
# It stops by itself once that Python has ended, removing its folder.
for _ in $(seq 50); do
    [ -z "$(ls -A "$work/tmp"/larder-* 2>/dev/null)" ] && break
    sleep 0.1
done
[ -z "$(ls -A "$work/tmp"/larder-* 2>/dev/null)" ] || {
    echo "package.sh: the wheel's server did not stop after its process ended" >&2; exit 1; }

# --- done ----------------------------------------------------------------------------
cp "$platform" "$pure" "$sdist" "$dist/"
if [ -n "${LARDER_VERBOSE:-}" ]; then
    sed 's/^/    /' "$work/auditwheel.txt" >&2
fi
echo "package.sh: $tag (auditwheel agrees; the installed wheel starts its server)" >&2
for file in "$platform" "$pure" "$sdist"; do
    echo "$dist/$(basename "$file") ($(du -h "$file" | cut -f1))"
done
