"""bench/loadgen.c, the load generator of bench/'s scripts: built into
.build/loadgen, run against a server's port, its one JSON line read back.

    import loadgen  (bench/ is on the path of a script in it)
    loadgen.build()
    loadgen.run(server.port, "cycle", body, clients, seconds)
"""
import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
BINARY = os.path.join(os.path.dirname(HERE), ".build", "loadgen")


def build():
    os.makedirs(os.path.dirname(BINARY), exist_ok=True)
    subprocess.run(["gcc", "-O2", "-pthread", "-o", BINARY, os.path.join(HERE, "loadgen.c")], check=True)


def run(port, mode, arg, clients, seconds, path=None, allow_errors=False):
    """loadgen's JSON answer (see its modes: `seconds` is the COUNT of a
    create, `path` the PATH of a post). A run with errors raises, unless
    `allow_errors` (its "errors" then say how many)."""
    done = subprocess.run([BINARY, "127.0.0.1", str(port), mode] + ([path] if path else []) + [arg, str(clients), str(seconds)],
                          capture_output=True, text=True)
    if done.returncode != 0 and not (allow_errors and done.returncode == 1 and done.stdout):
        raise subprocess.CalledProcessError(done.returncode, done.args, done.stdout, done.stderr)
    return json.loads(done.stdout)
