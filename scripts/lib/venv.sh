# Sourced by the scripts that need Python packages of their own
# (scripts/schemathesis, scripts/browser-test, clients/python/test).
#
#   larder_venv VENV PYTHON WHAT CHECK PACKAGE...
#
# Makes the virtual environment VENV once: under a lock on VENV.lock (file
# descriptor 9, still held on return: `flock -u 9` to let others in), so
# two runs at once make it once. When CHECK (a shell function) fails, VENV is
# made afresh with PYTHON and the PACKAGEs are pip-installed into it; then
# CHECK must pass. Debian keeps venv and ensurepip in python3-venv, which is
# installed when missing.
larder_venv() {
    local venv=$1 python=$2 what=$3 check=$4
    shift 4
    mkdir -p "$(dirname "$venv")"
    exec 9>"$venv.lock"
    flock 9
    "$check" && return 0
    echo "larder: installing $what into $venv" >&2
    if ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
        local sudo=""
        [ "$(id -u)" -eq 0 ] || sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-venv >/dev/null
    fi
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
    "$check" || { echo "larder: $what did not install into $venv" >&2; exit 1; }
}
