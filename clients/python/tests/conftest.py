"""A real Larder server for each test module.

The binary comes from $LARDER_BINARY, the fixtures directory from
$LARDER_FIXTURES (default: fixtures/ of the repository). A module may set
SERVER_ARGS, a list of extra `larder serve` flags. `hidden_server` is one
whose files this process cannot see (remote mode's tests).
"""
import os
import sys

import pytest

import larder

# The sample suite is run by test_plugin.py in a pytest of its own.
collect_ignore = ["sample"]

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
HIDDEN_LARDER = os.path.join(REPO, "Tests", "support", "hidden-larder")

sys.path.insert(0, os.path.join(REPO, "Tests", "support"))
import processes  # noqa: E402  (the one harness of the repository's Python scripts)


class Server(processes.Server):
    """`larder serve --port 0` on a fresh root; `url` from its first line."""

    @property
    def url(self):
        return self.base

    def stop(self):
        code = super().stop()
        self.process.stdout.close()  # drained to its end: the server has exited
        return code


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
    running = Server(_binary(), str(base / "root"), fixtures, *extra)
    yield running
    running.stop()


@pytest.fixture
def client(server):
    with larder.Client(url=server.url) as c:
        yield c


@pytest.fixture(scope="module")
def hidden_server(tmp_path_factory):
    """`larder serve` as a test on another machine (or in a simulator) sees
    it: run by Tests/support/hidden-larder in a mount namespace of its own,
    with a tmpfs over its root's parent, so no store's `path` exists for
    this process; HTTP on loopback as ever."""
    base = tmp_path_factory.mktemp("larder-hidden")
    fixtures = os.environ.get("LARDER_FIXTURES") or os.path.join(REPO, "fixtures")
    environment = dict(os.environ, LARDER_HIDDEN_BINARY=_binary())
    running = Server(HIDDEN_LARDER, str(base / "root"), fixtures, env=environment)
    yield running
    running.stop()
