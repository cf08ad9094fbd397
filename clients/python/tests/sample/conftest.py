"""What the sample's tests record for the test that ran them, into
$SAMPLE_RECORDS/NAME.json: the store's info, and under "recorded" which
process had it from which server (and that server's pid, when it is a
server `larder up` started under this run's TMPDIR), and when."""
import glob
import json
import os
import tempfile
import time

import pytest


def server_pid(url):
    for path in glob.glob(os.path.join(tempfile.gettempdir(), "larder-*", "*", "server.json")):
        try:
            with open(path) as f:
                server = json.load(f)
        except (OSError, ValueError):
            continue
        if server.get("url") == url:
            return server.get("pid")
    return None


@pytest.fixture
def record():
    def write(store, name):
        info = dict(store.info, recorded={
            "at": time.time(), "pid": os.getpid(), "worker": os.environ.get("PYTEST_XDIST_WORKER"),
            "url": store.client.url, "server_pid": server_pid(store.client.url)})
        with open(os.path.join(os.environ["SAMPLE_RECORDS"], name + ".json"), "w") as f:
            json.dump(info, f)
    return write
