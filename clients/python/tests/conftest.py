"""A real Larder server for each test module.

The binary comes from $LARDER_BINARY, the fixtures directory from
$LARDER_FIXTURES (default: fixtures/ of the repository). A module may set
SERVER_ARGS, a list of extra `larder serve` flags.
"""
import os
import signal
import subprocess

import pytest

import larder

# The sample suite is run by test_plugin.py in a pytest of its own.
collect_ignore = ["sample"]

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


class Server:
    """`larder serve --port 0` on a fresh root; `url` from its first line."""

    def __init__(self, binary, root, log_path, fixtures, extra=()):
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.process = subprocess.Popen(
            [binary, "serve", "--port", "0", "--root", root, "--fixtures", fixtures, *extra],
            stdout=subprocess.PIPE, stderr=self.log, stdin=subprocess.DEVNULL)
        line = self.process.stdout.readline().decode("utf-8", "replace").strip()
        prefix = "larder listening on "
        if not line.startswith(prefix):
            self.stop()
            raise RuntimeError("larder did not start: %r\n%s" % (line, self.log_text()))
        self.url = line[len(prefix):]

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process.stdout.close()
        self.log.close()


def _binary():
    binary = os.environ.get("LARDER_BINARY")
    if not binary or not os.access(binary, os.X_OK):
        pytest.exit("set LARDER_BINARY to a built larder (clients/python/test BINARY does)", returncode=2)
    return binary


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    base = tmp_path_factory.mktemp("larder-server")
    fixtures = os.environ.get("LARDER_FIXTURES") or os.path.join(REPO, "fixtures")
    extra = getattr(request.module, "SERVER_ARGS", ())
    # --root must not exist yet: the server makes it.
    running = Server(_binary(), str(base / "root"), str(base / "server.log"), fixtures, extra)
    yield running
    running.stop()


@pytest.fixture
def client(server):
    with larder.Client(url=server.url) as c:
        yield c
