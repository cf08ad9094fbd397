"""What the plugin does in the background (issue 48), as a user meets it:
pytest runs a small suite in a subprocess. The store of the test pytest
runs next is made while the current one runs, and a passing test's store
is deleted while the next one runs; the session's end deletes the store
made ahead that no test took and waits for every request, so nothing is
left on the server but what failed tests kept; a delete that failed in the
background fails the run, naming the test whose store it was.

The tests wait for events (a store listed, a request answered), with
deadlines, never for a while.
"""
import contextlib
import http.client
import http.server
import json
import os
import shutil
import socket as socketlib
import sqlite3
import subprocess
import sys
import threading
import urllib.parse
import uuid
import zipfile

import pytest

import larder
from larder._client import RUN_VARIABLES

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
RUN_ENVIRONMENT = {name for pair in RUN_VARIABLES for name in pair if name}

CONFTEST = '''
import json
import os
import urllib.request

import pytest

import larder._ahead

if os.environ.get("AHEAD_MAX_AGE"):  # how young a store made ahead must be to be handed out
    larder._ahead.READY_MAX_AGE = float(os.environ["AHEAD_MAX_AGE"])


@pytest.fixture
def note(request):
    """Notes a value for the outer test: RECORDS/<test>-<key>.json."""
    def write(key, value):
        with open(os.path.join(os.environ["RECORDS"], "%s-%s.json" % (request.node.name, key)), "w") as f:
            json.dump(value, f)
    return write


def pytest_runtest_setup(item):
    # A spec that changes after the store was made ahead (when the previous
    # test's setup ran): the store made ahead is not this test's any more.
    if item.name == "test_3_whose_spec_changes":
        item.add_marker(pytest.mark.larder(fixtures=["artists", "artworks"]))


def pytest_sessionfinish(session):
    # After the plugin's own end, while the run's server still runs (a
    # self-started one lives while this process does): what it still has.
    # In a pytest-xdist worker, nothing: the controller asks once they are done.
    path = os.path.join(os.environ["RECORDS"], "test_1_writes-url.json")
    if hasattr(session.config, "workerinput") or not os.path.exists(path):
        return
    with open(path) as f:
        url = json.load(f)
    with urllib.request.urlopen(url + "/stores") as answer:
        stores = json.load(answer)["stores"]
    with open(os.path.join(os.environ["RECORDS"], "left.json"), "w") as f:
        json.dump(stores, f)
'''

TESTS = '''
import contextlib
import os
import sqlite3
import time

import pytest

import larder

pytestmark = pytest.mark.larder(template="gallery", fixtures=["artists"])
SEEN = {}


def db(store):
    return contextlib.closing(sqlite3.connect(store.path, isolation_level=None))


def test_1_writes(larder_store, larder_client, note):
    note("url", larder_client.url)
    SEEN["first"] = larder_store.id
    with db(larder_store) as c:
        c.execute("INSERT INTO artists (name) VALUES ('Written by test 1')")
    # The next test's store is made while this one runs: the server lists it, labelled as that test.
    label = larder_store.info["label"].replace("test_1_writes", "test_2_gets_a_fresh_store")
    deadline = time.monotonic() + 30
    while True:
        found = larder_client._call("GET", "/stores", query={"label": label})["stores"]
        if found:
            break
        assert time.monotonic() < deadline, "no store for the next test 30 s on"
        time.sleep(0.005)
    note("made-ahead", found[0]["id"])


def test_2_gets_a_fresh_store(larder_store, larder_client, note):
    note("store", larder_store.info)
    # Fresh: as the template and its fixture made it, nothing of test 1's.
    assert larder_store.id != SEEN["first"]
    assert larder_store.counts() == {"album_artworks": 0, "albums": 0, "artists": 4, "artwork_partners": 0,
                                     "artworks": 0, "partners": 0}
    with db(larder_store) as c:
        assert c.execute("SELECT count(*) FROM artists WHERE name = 'Written by test 1'").fetchone() == (0,)
    # Test 1's store is gone: its delete was answered before this test's first request of its own.
    with pytest.raises(larder.LarderError) as caught:
        larder_client.store(SEEN["first"])
    assert caught.value.code == "store_not_found"


def test_3_whose_spec_changes(larder_store, note):
    note("store", larder_store.info)
    assert larder_store.counts(["artists", "artworks"]) == {"artists": 4, "artworks": 12}


@pytest.mark.skip(reason="never runs: the store made ahead for it is deleted")
def test_4_skipped(larder_store):
    pass


@pytest.mark.larder(template="gallery", fixtures=None)
def test_5_after_a_skipped_test(larder_store, note):
    note("store", larder_store.info)
    assert larder_store.counts("artists") == {"artists": 0}


def test_6_fails(larder_store, note):
    note("store", larder_store.info)
    with db(larder_store) as c:
        c.execute("INSERT INTO artists (name) VALUES ('Left by test 6')")
    assert False, "fails on purpose"


def test_7_last(larder_store):
    assert larder_store.counts("artists") == {"artists": 4}
'''


def clean_environment():
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("LARDER_", "PYTEST_")) and k not in ("PYTHONPATH", "TMPDIR") and k not in RUN_ENVIRONMENT}


def run_suite(work, *args, env=None, tests=TESTS):
    """pytest on CONFTEST and `tests` (test_ahead_sample.py) in work/suite, with
    fixtures/gallery and a TMPDIR of its own; (exit code, output, {record: value})."""
    suite = work / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_ahead_sample.py").write_text(tests)
    shutil.copytree(os.path.join(REPO, "fixtures", "gallery"), str(suite / "fixtures" / "gallery"))
    records = work / "records"
    records.mkdir()
    (work / "tmp").mkdir()
    environment = clean_environment()
    environment.update({"RECORDS": str(records), "TMPDIR": str(work / "tmp")})
    environment.update(env or {})
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(suite), *args],
                            cwd=str(suite), env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=180)
    found = {path.name[:-5]: json.loads(path.read_text()) for path in records.glob("*.json")}
    return result.returncode, result.stdout.decode("utf-8", "replace"), found


def check_run(work, code, output, records, run, ahead=True):
    """The sample's outcome; answers the failing test's store (its info as the test saw it)."""
    prefix = run + "/test_ahead_sample.py/"
    assert code == 1, output
    assert "1 failed, 5 passed, 1 skipped" in output, output
    # Test 2 had the store made while test 1 ran (unless it was too old by then).
    made_ahead = records["test_2_gets_a_fresh_store-store"]["id"] == records["test_1_writes-made-ahead"]
    assert made_ahead == ahead, records
    assert records["test_2_gets_a_fresh_store-store"]["label"] == prefix + "test_2_gets_a_fresh_store"
    # A spec that changed after the store was made ahead: the test got one of its own spec.
    assert records["test_3_whose_spec_changes-store"]["fixtures"] == ["artists", "artworks"]
    assert records["test_5_after_a_skipped_test-store"]["fixtures"] == []
    failed = records["test_6_fails-store"]
    assert failed["label"] == prefix + "test_6_fails"
    return failed


def check_kept(work, client, failed, run):
    """The failing test's store: kept, with its test's label, its artifact saved with what the test wrote."""
    kept = client.store(failed["id"])
    assert kept.info["keep"] is True
    assert kept.info["label"] == run + "/test_ahead_sample.py/test_6_fails"
    artifact = work / "suite" / "larder-artifacts" / ("test_ahead_sample.py_test_6_fails-%s.zip" % failed["id"])
    with zipfile.ZipFile(str(artifact)) as archive:
        archive.extract("store.sqlite", str(work))
    with contextlib.closing(sqlite3.connect(str(work / "store.sqlite"))) as db:
        assert db.execute("SELECT count(*) FROM artists WHERE name = 'Left by test 6'").fetchone() == (1,)


@pytest.mark.parametrize("xdist, stale", [(False, False), (True, False), (False, True)],
                         ids=["one-process", "xdist", "too-old"])
def test_with_larder_url(server, tmp_path, xdist, stale):
    run = "ahead-" + uuid.uuid4().hex[:8]
    args = ["-p", "xdist", "-n", "2", "--dist", "loadfile"] if xdist else []
    if xdist:
        pytest.importorskip("xdist", reason="pytest-xdist is not installed")
    env = {"LARDER_URL": server.url, "LARDER_RUN": run}
    if stale:  # every store made ahead is too old when its test comes: deleted, and the test's made then
        env["AHEAD_MAX_AGE"] = "0"
    code, output, records = run_suite(tmp_path, *args, env=env)
    failed = check_run(tmp_path, code, output, records, run, ahead=not stale)
    with larder.Client(url=server.url) as client:
        # Nothing left of the run but the failed test's store: neither a passing
        # test's, nor one made ahead for a test that did not take it.
        left = client._call("GET", "/stores", query={"label_prefix": run + "/"})["stores"]
        assert [s["id"] for s in left] == [failed["id"]], left
        check_kept(tmp_path, client, failed, run)
        client.store(failed["id"]).delete()


@pytest.mark.parametrize("xdist", [False, True], ids=["one-process", "xdist"])
def test_self_started(tmp_path, xdist):
    args = ["-p", "xdist", "-n", "2", "--dist", "loadfile"] if xdist else []
    if xdist:
        pytest.importorskip("xdist", reason="pytest-xdist is not installed")
    run = "self-" + uuid.uuid4().hex[:8]
    code, output, records = run_suite(tmp_path, *args, env={"LARDER_BINARY": os.environ["LARDER_BINARY"],
                                                            "LARDER_RUN": run})
    failed = check_run(tmp_path, code, output, records, run)
    # What the server had once the run had ended, while it still ran: the failed test's store alone.
    assert [(s["id"], s["keep"], s["label"]) for s in records["left"]] == [
        (failed["id"], True, run + "/test_ahead_sample.py/test_6_fails")], records["left"]
    artifact = tmp_path / "suite" / "larder-artifacts" / ("test_ahead_sample.py_test_6_fails-%s.zip" % failed["id"])
    assert artifact.exists(), output


# --- a delete that fails in the background ---------------------------------------

class RefusingProxy:
    """An HTTP proxy in front of the server that answers 500 to the DELETE
    of any store whose label (as POST /stores answered it) ends with
    `refused`; everything else is the server's answer."""

    def __init__(self, upstream, refused):
        parts = urllib.parse.urlsplit(upstream)
        self.refused_ids = set()
        self.refusals = 0
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def forward(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                store = self.path.rsplit("/", 1)[-1]
                if self.command == "DELETE" and store in proxy.refused_ids:
                    proxy.refusals += 1
                    self.answer(500, b'{"error": {"code": "internal", "message": "the proxy refused it", "details": {}}}')
                    return
                upstream = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "accept", "authorization")}
                upstream.request(self.command, self.path, body=body, headers=headers)
                answer = upstream.getresponse()
                data = answer.read()
                upstream.close()
                if self.command == "POST" and self.path == "/stores" and answer.status == 201:
                    info = json.loads(data)
                    if (info.get("label") or "").endswith(refused):
                        proxy.refused_ids.add(info["id"])
                self.answer(answer.status, data, answer.getheader("Content-Type"))

            def answer(self, status, data, content_type="application/json"):
                self.send_response(status)
                if content_type:
                    self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = do_PATCH = do_PUT = forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


DELETE_FAILS = '''
import pytest

pytestmark = pytest.mark.larder(template="gallery")


def test_a_passes(larder_store):
    pass


def test_b_whose_delete_fails(larder_store):
    pass


def test_c_passes(larder_store):
    pass
'''


@pytest.mark.parametrize("last", [False, True], ids=["then-another-test", "the-last-test"])
def test_a_failed_background_delete_fails_the_run(server, tmp_path, last):
    """The test passed, then its store's delete, sent in the background,
    failed: the run fails, an error saying which store, whose, and why (at
    the teardown of a later test, or at the session's end)."""
    refused = "test_c_passes" if last else "test_b_whose_delete_fails"
    proxy = RefusingProxy(server.url, refused)
    try:
        run = "refused-" + uuid.uuid4().hex[:8]
        code, output, _ = run_suite(tmp_path, env={"LARDER_URL": proxy.url, "LARDER_RUN": run}, tests=DELETE_FAILS)
    finally:
        proxy.close()
    assert proxy.refusals == 1
    (store,) = proxy.refused_ids
    assert code == 1, output
    assert "3 passed, 1 error" in output, output
    assert ("deleting store %s (the store of test_ahead_sample.py::%s, which passed) failed: 500 internal: "
            "the proxy refused it" % (store, refused)) in output, output
    with larder.Client(url=server.url) as client:
        # The refused store is still there; the others are gone.
        left = client._call("GET", "/stores", query={"label_prefix": run + "/"})["stores"]
        assert [s["id"] for s in left] == [store], left
        client.store(store).delete()


# --- the connections ---------------------------------------------------------------

class TerseServer:
    """A socket server that answers the requests of one write (the plugin
    writes several at once) and then closes the connection without saying
    so, as a server does whose idle limit struck between two requests; its
    answers' bodies are chunked. `requests` are the request lines it read."""

    def __init__(self, one_at_a_time=False):
        # one_at_a_time: answers only the first request of a write, saying
        # Connection: close (the server runs none of the others).
        self.one_at_a_time = one_at_a_time
        self.listener = socketlib.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.url = "http://127.0.0.1:%d" % self.listener.getsockname()[1]
        self.requests = []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            with connection:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = connection.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                answers = b""
                while b"\r\n\r\n" in data:  # these requests carry no bodies
                    head, data = data.split(b"\r\n\r\n", 1)
                    line = head.split(b"\r\n", 1)[0].decode()
                    self.requests.append(line)
                    answers += self.answer(line)
                    if self.one_at_a_time:
                        answers = answers.replace(b"\r\n", b"\r\nConnection: close\r\n", 1)
                        break
                connection.sendall(answers)

    @staticmethod
    def answer(line):
        if line.startswith("DELETE /stores/gone"):
            body = b'{"error": {"code": "store_not_found", "message": "no store", "details": {}}}'
            status = "404 Not Found"
        elif line.startswith("DELETE /stores/broken"):
            body = b'{"error": {"code": "internal", "message": "it broke", "details": {}}}'
            status = "500 Internal Server Error"
        else:
            return b"HTTP/1.1 204 No Content\r\n\r\n"
        return (("HTTP/1.1 %s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n"
                 % (status, len(body[:10]))).encode() + body[:10] + ("\r\n%x\r\n" % len(body[10:])).encode() + body[10:]
                + b"\r\n0\r\n\r\n")

    def close(self):
        self.listener.close()


def test_connections_the_server_closed_are_made_anew_and_chunked_answers_read():
    terse = TerseServer()
    try:
        client = larder.Client(url=terse.url)
        ahead = larder._ahead.Ahead(client)
        names = ["a", "gone", "b", "broken", "c", "d", "e", "f", "g"]
        # Written two by two, the second write of each pair on a connection the server has closed.
        for pair in range(0, len(names), 2):
            for name in names[pair:pair + 2]:
                ahead.delete(name, "the store of test_%s" % name)
            ahead.flush()
            ahead.settle()
        ahead.finish(timeout=30)
        # Each delete reached the server once; a store already gone is no failure, a 500 is.
        assert sorted(terse.requests) == sorted("DELETE /stores/%s HTTP/1.1" % n for n in names)
        assert ahead.take_failures() == ["deleting store broken (the store of test_broken) failed: 500 internal: it broke"]
    finally:
        terse.close()


def test_a_stores_lifetime_from_its_answer():
    # A store made ahead is handed out within a fifth of this only (and within READY_MAX_AGE).
    lifetime = larder._ahead._lifetime
    assert lifetime({"created_at": "2026-11-27T14:16:45.218Z", "expires_at": "2026-11-27T14:21:45.218Z"}) == 300
    assert lifetime({"created_at": "2026-11-27T14:16:45Z", "expires_at": "2026-11-27T14:16:47.5Z"}) == 2.5
    assert lifetime({"created_at": None, "expires_at": None}) == float("inf")
    assert lifetime({}) == float("inf")


def test_requests_after_an_answer_that_closes_the_connection_are_made_again():
    terse = TerseServer(one_at_a_time=True)
    try:
        ahead = larder._ahead.Ahead(larder.Client(url=terse.url))
        names = ["a", "b", "gone", "c"]
        for name in names:
            ahead.delete(name, "the store of test_%s" % name)
        ahead.finish(timeout=30)  # written together; each answer closes the connection
        assert sorted(terse.requests) == sorted("DELETE /stores/%s HTTP/1.1" % n for n in names)
        assert ahead.take_failures() == []
    finally:
        terse.close()
