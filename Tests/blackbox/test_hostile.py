#!/usr/bin/env python3
"""Hostile clients against the real binary: what a web page, a slow or
stalled socket, a lying header or a full disk does to Larder. Each attack
must end in the contract's error, and the server must go on serving others.

    python3 Tests/blackbox/test_hostile.py .build/debug/larder
"""
import http.client
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from processes import FIXTURES, Peak, fresh_root, half_made, open_descriptors, run_tests, scratch_folder, wait_until  # noqa: E402
from test_client import Larder  # noqa: E402  (the same server harness)


class ServerCase(unittest.TestCase):
    """The real server on a fresh root, with `extra` settings, and ways to reach it."""
    extra = ()

    def setUp(self):
        self.root = fresh_root("larder-hostile-")
        self.larder = Larder(self.root, *self.extra)
        self.host, self.port = self.larder.address.split(":")[0], self.larder.port

    def tearDown(self):
        if self.larder.process.poll() is None:
            self.larder.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def raw(self, data, timeout=10):
        """Sends bytes as they are; answers (status, headers+body bytes)."""
        s = socket.create_connection((self.host, self.port), timeout=timeout)
        s.sendall(data)
        out = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
                head, _, body = out.partition(b"\r\n\r\n")
                length = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
                if _ and (data.startswith(b"HEAD") or (length and len(body) >= length[0])):
                    break
        finally:
            s.close()
        return int(out.split(b" ")[1]), out

    def request(self, method, path, body=None, headers=None, timeout=30, content_type=None):
        """(status, body) of a request with only the headers given (and `content_type` when given)."""
        status, answer, _ = self.larder.call(method, path, body, content_type, headers=headers, timeout=timeout)
        return status, answer

    def store(self, body=None):
        status, store, _ = self.larder.call("POST", "/stores", body or {"template": "gallery", "fixtures": ["artists", "artworks"]})
        self.assertEqual(status, 201, store)
        return store

    def upload(self, script):
        """A store uploaded from a database that the SQL `script` makes (as an app's old database)."""
        path = os.path.join(scratch_folder(self, "larder-upload-"), "upload.sqlite")
        db = sqlite3.connect(path)
        db.executescript(script)
        db.close()
        with open(path, "rb") as f:
            status, store, _ = self.larder.call("POST", "/stores", f.read(), "application/vnd.sqlite3")
        self.assertEqual(status, 201, store)
        return store



class HostileTests(ServerCase):
    # A web page must not drive the server.

    def test_foreign_origin_and_host_are_refused(self):
        status, body = self.request("POST", "/stores", b"{}", {"Origin": "http://attacker.example", "Content-Type": "application/json"})
        self.assertEqual((status, body["error"]["code"]), (403, "forbidden"))
        status, body = self.request("POST", "/stores", b"{}", {"Origin": "null", "Content-Type": "application/json"})
        self.assertEqual(status, 403)
        status, body = self.request("GET", "/stores", headers={"Host": "attacker.example:%d" % self.port})
        self.assertEqual((status, body["error"]["code"]), (403, "forbidden"))
        # A form POST from a foreign page (no JSON type) is refused before anything is made.
        status, _ = self.request("POST", "/stores", b"template=gallery", {"Origin": "https://evil.test", "Content-Type": "application/x-www-form-urlencoded"})
        self.assertEqual(status, 403)
        self.assertEqual(os.listdir(os.path.join(self.root, "stores")), [])
        # DNS rebinding: names that only look like loopback addresses are names.
        for host in ["127.x.attacker-rebind.example", "127.0.0.1.attacker.example", "127.1", "localhost.attacker.example"]:
            status, body = self.request("GET", "/stores", headers={"Host": "%s:%d" % (host, self.port), "Origin": "http://%s:%d" % (host, self.port)})
            self.assertEqual((status, body["error"]["code"]), (403, "forbidden"), host)
            status, body = self.request("DELETE", "/stores?label_prefix=", headers={"Host": host})
            self.assertEqual(status, 403, host)
        # The server's own names, any loopback address, and clients that send no Origin, work.
        for host in ["127.0.0.1:%d" % self.port, "localhost:%d" % self.port, "localhost", "127.0.0.2", "[::1]:%d" % self.port,
                     "[0:0:0:0:0:0:0:1]", "[::ffff:127.0.0.1]"]:
            self.assertEqual(self.request("GET", "/health", headers={"Host": host})[0], 200, host)
        status, _ = self.request("POST", "/stores", b"{}", {"Origin": "http://127.0.0.1:%d" % self.port, "Content-Type": "application/json"})
        self.assertEqual(status, 201)
        # A page served on another port of this machine (another server's, another user's) is another origin.
        for origin in ["http://127.0.0.1:%d" % (self.port + 1), "http://localhost:8080", "http://127.0.0.1", "http://[::1]:%d" % (self.port + 1)]:
            status, body = self.request("POST", "/stores", b"{}", {"Origin": origin, "Content-Type": "application/json"})
            self.assertEqual((status, body["error"]["code"]), (403, "forbidden"), origin)

    def test_a_get_starts_no_check(self):
        # Any page can make a browser GET a URL (an <img>): the checks page
        # shows the last run and runs them only on its button's POST.
        status, page = self.request("GET", "/checks/page", headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Dest": "image"})
        self.assertEqual(status, 200)
        self.assertIn(b"no check has run", page)
        self.assertIn(b"no check has run", self.request("GET", "/checks/page")[1], "the GET ran nothing")
        status, _ = self.request("POST", "/checks/page", b"", {"Origin": "http://127.0.0.1:%d" % (self.port + 1)})
        self.assertEqual(status, 403)
        status, answer = self.request("POST", "/checks/page", b"", {"Origin": "http://127.0.0.1:%d" % self.port})
        self.assertEqual(status, 303, answer)
        status, page = self.request("GET", "/checks/page")
        self.assertIn(b"passed, 0 failed", page)

    # Lying and odd headers.

    def test_ambiguous_lengths_and_odd_requests(self):
        status, _ = self.raw(b"POST /stores HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}")
        self.assertEqual(status, 400)
        status, _ = self.raw(b"POST /stores HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
        self.assertEqual(status, 400)
        status, _ = self.raw(b"POST /stores HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 9223372036854775807\r\n\r\n{}")
        self.assertEqual(status, 413)
        self.assertEqual(os.listdir(os.path.join(self.root, "stores")), [], "no store from a refused request")
        status, out = self.raw(b"HEAD /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        self.assertEqual(status, 200)
        status, out = self.raw(b"GET /templates/gallery%00 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        self.assertEqual(status, 404, out[:300])
        bad = b'{"label": "\xff\xfe"}'
        status, out = self.raw(b"POST /stores HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(bad), bad))
        self.assertEqual(status, 400, out[:300])

    # Slow and stalled sockets.

    def test_slow_headers_do_not_lock_out_other_clients(self):
        self.larder.stop()
        shutil.rmtree(self.root, ignore_errors=True)
        self.larder = Larder(self.root, "--connection-limit", "64", "--header-timeout-seconds", "2")
        self.port = self.larder.port
        slow = []
        for _ in range(80):  # more than the connection limit
            try:
                s = socket.create_connection((self.host, self.port), timeout=5)
                s.sendall(b"G")
                slow.append(s)
            except OSError:
                pass
        stop = time.time() + 7
        def trickle():
            while time.time() < stop:
                for s in slow:
                    try:
                        s.sendall(b"E")
                    except OSError:
                        pass
                time.sleep(0.5)
        t = threading.Thread(target=trickle, daemon=True)
        t.start()

        def served():
            try:
                return self.request("GET", "/health", timeout=1)[0] == 200
            except (OSError, http.client.HTTPException):
                return False
        # Served once the header deadline (2 s, swept every second) has passed, while they still trickle.
        self.assertTrue(wait_until(served, stop - 0.5 - time.time()), "slow headers locked the other clients out")
        started = time.time()
        status, _ = self.request("GET", "/health", timeout=5)
        self.assertEqual(status, 200)
        self.assertLess(time.time() - started, 2)
        t.join()
        for s in slow:
            s.close()

    def test_stalled_downloads_do_not_starve_other_requests(self):
        big = self.store({})
        db = sqlite3.connect(big["path"])
        db.execute("CREATE TABLE noise (b BLOB)")
        db.executemany("INSERT INTO noise VALUES (randomblob(100000))", [()] * 300)  # ~30 MB
        db.commit()
        db.close()
        stalled = []
        for i in range(40):
            s = socket.create_connection((self.host, self.port), timeout=5)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(b"GET /stores/%s/artifact?compression=%s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                      % (big["id"].encode(), b"store" if i % 2 else b"deflate"))
            stalled.append(s)
        # Each stalled download starts (its status line arrives), then its maker
        # stops a few MiB ahead of the reader and holds no thread and no CPU.
        for s in stalled:
            s.settimeout(30)
            self.assertEqual(s.recv(12), b"HTTP/1.1 200")
        pid = self.larder.process.pid
        def cpu():
            fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
            return int(fields[11]) + int(fields[12])
        seen = [-1]

        def idle():
            now, last = cpu(), seen[-1]
            seen.append(now)
            return now == last
        wait_until(idle, 90, interval=1)  # no CPU used over a second
        self.assertEqual(cpu(), seen[-1], "the server kept working for stalled downloads")
        self.assertLess(len(os.listdir("/proc/%d/task" % pid)), 40, "threads held by stalled downloads")
        other = self.store()
        upload = open(os.path.join(FIXTURES, "boardgames", "snapshots", "v1.sqlite"), "rb").read()
        checks = [
            ("POST", "/stores/%s/query" % other["id"], json.dumps({"sql": "SELECT count(*) FROM artworks"}).encode(), {"Content-Type": "application/json"}),
            ("POST", "/stores?template=boardgames", upload, {"Content-Type": "application/vnd.sqlite3"}),
            ("GET", "/stores/%s/database" % other["id"], None, {}),
            ("GET", "/stores/%s/artifact" % other["id"], None, {}),
            ("POST", "/stores/%s/fixtures" % other["id"], json.dumps({"rows": {"albums": [{"title": "x"}]}}).encode(), {"Content-Type": "application/json"}),
        ]
        for method, path, body, headers in checks:
            started = time.time()
            status, _ = self.request(method, path, body, headers, timeout=20)
            self.assertIn(status, (200, 201), path)
            self.assertLess(time.time() - started, 3, "%s %s waited behind stalled downloads" % (method, path))
        fds = open_descriptors(self.larder.pid)
        for s in stalled:
            s.close()
        self.assertLess(fds, 400)

    # Memory stays bounded whatever a client asks for.

    def test_huge_query_and_upload_keep_memory_bounded(self):
        store = self.store({})
        pid = self.larder.process.pid
        peak = Peak(pid)
        status, body, _ = self.larder.call("POST", "/stores/%s/query" % store["id"],
                                           {"sql": "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 60) SELECT zeroblob(20000000) FROM n"})
        query_growth = peak.stop()
        self.assertEqual(status, 200)
        self.assertTrue(body["truncated"])
        self.assertLess(query_growth, 400, "a 1.2 GB query grew the server by %.0f MiB" % query_growth)
        # A 120 MB upload goes to a file as it arrives.
        path = os.path.join(self.root, "..", os.path.basename(self.root) + "-upload.sqlite")
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE b (x BLOB)")
        db.executemany("INSERT INTO b VALUES (randomblob(1000000))", [()] * 120)
        db.commit()
        db.close()
        try:
            peak = Peak(pid)
            with open(path, "rb") as f:
                status, made, _ = self.larder.call("POST", "/stores", f.read(), content_type="application/vnd.sqlite3")
            upload_growth = peak.stop()
        finally:
            os.unlink(path)
        self.assertEqual(status, 201, made)
        self.assertLess(upload_growth, 60, "a 120 MB upload grew the server by %.0f MiB" % upload_growth)
        print("\n  peak RSS growth: 1.2 GB query %.1f MiB, 120 MB upload %.1f MiB" % (query_growth, upload_growth), file=sys.stderr)
        self.assertEqual([n for n in os.listdir(os.path.join(self.root, "tmp")) if n.startswith("upload-")], [])


class FairnessTests(ServerCase):
    """One suite's slow work never holds another's turn: each request has a
    thread of its own (up to a bound), one store's at most four at once."""

    extra = ("--query-timeout-ms", "3000", "--busy-timeout-ms", "1000")

    def timed(self, method, path, body=None):
        started = time.monotonic()
        status, _ = self.request(method, path, body, content_type="application/json")
        return status, time.monotonic() - started

    def in_threads(self, count, method, path_of, body=None):
        statuses = []
        threads = [threading.Thread(target=lambda i=i: statuses.append(self.timed(method, path_of(i), body)[0])) for i in range(count)]
        for t in threads:
            t.start()
        return threads, statuses

    def work_threads(self):
        """The server's threads of its work pool (named larder.work), busy or idle."""
        tasks = "/proc/%d/task" % self.larder.pid
        names = []
        for task in os.listdir(tasks):
            try:
                with open(os.path.join(tasks, task, "comm")) as f:
                    names.append(f.read().strip())
            except OSError:
                pass
        return names.count("larder.work")

    def test_sixteen_endless_queries_do_not_delay_another_suites_select(self):
        # A queue as wide as the cores would run two or three of them at a time and hold the SELECT behind the rest.
        theirs = [self.store()["id"] for _ in range(16)]
        mine = self.store()["id"]
        endless = {"sql": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"}
        threads, statuses = self.in_threads(16, "POST", lambda i: "/stores/%s/query" % theirs[i], endless)
        self.assertTrue(wait_until(lambda: self.work_threads() >= 16), "the sixteen queries never ran at once")
        status, waited = self.timed("POST", "/stores/%s/query" % mine, {"sql": "SELECT 1"})
        self.assertEqual(status, 200)
        self.assertLess(waited, 0.5)
        for t in threads:
            t.join()
        self.assertEqual(statuses, [408] * 16)

    def test_diffs_waiting_on_a_locked_store_do_not_delay_another_suites_reset(self):
        # Only four of them may wait on the store at once: the rest must hold no thread.
        locked, other = self.store(), self.store()
        holder = sqlite3.connect(locked["path"], isolation_level=None)
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("INSERT INTO artists (name) VALUES ('held')")
        try:
            before = open_descriptors(self.larder.pid)
            threads, statuses = self.in_threads(12, "GET", lambda i: "/stores/%s/diff" % locked["id"])
            wait_until(lambda: open_descriptors(self.larder.pid) >= before + 12)  # the server has taken them all
            status, waited = self.timed("POST", "/stores/%s/reset" % other["id"])
            self.assertEqual(status, 200)
            self.assertLess(waited, 0.5)
            for t in threads:
                t.join()
            self.assertEqual(statuses, [409] * 12)
        finally:
            holder.close()


class SpecialFileTests(ServerCase):
    """A test may swap any file of its own store or build for a FIFO (or a
    socket, or a device): the requests on it answer, with the contract's
    error, and no other suite's request waits behind them."""

    extra = ("--operation-timeout-ms", "10000", "--query-timeout-ms", "3000")

    def answers_within(self, method, path, body=None, seconds=20):
        """(status, body), or None when no answer came within `seconds`."""
        try:
            return self.request(method, path, body, timeout=seconds, content_type="application/json")
        except (socket.timeout, TimeoutError):
            return None

    def others_are_served(self):
        other = self.store()
        for method, path, body, expected in [("GET", "/health", None, 200), ("POST", "/stores", {"template": "gallery"}, 201),
                                             ("GET", "/stores/%s/counts" % other["id"], None, 200),
                                             ("POST", "/stores/%s/query" % other["id"], {"sql": "SELECT 1"}, 200)]:
            answer = self.answers_within(method, path, body, seconds=10)
            self.assertIsNotNone(answer, "another suite's %s %s waited" % (method, path))
            self.assertEqual(answer[0], expected, (method, path, answer))

    def test_fifos_in_place_of_a_stores_files_block_nothing(self):
        for name in ["store.sqlite-shm", "store.sqlite-wal", "store.sqlite-journal", "store.sqlite"]:
            store = self.store()
            path = os.path.join(os.path.dirname(store["path"]), name)
            if os.path.exists(path):
                os.unlink(path)
            os.mkfifo(path, 0o660)
            results = {}

            def ask(method, route, body=None):
                results[(method, route)] = self.answers_within(method, "/stores/%s%s" % (store["id"], route), body)
            asks = [("GET", "/counts"), ("POST", "/query", {"sql": "SELECT count(*) FROM artists"}), ("GET", "/schema"),
                    ("GET", "/database"), ("GET", "/artifact"), ("GET", "/diff"), ("PATCH", "", {"keep": True}),
                    ("POST", "/fixtures", {"sql": "INSERT INTO artists (name) VALUES ('x')"})]
            threads = [threading.Thread(target=ask, args=a) for a in asks]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.others_are_served()
            for key, answer in results.items():
                self.assertIsNotNone(answer, "%s: %s %s never answered" % (name, key[0], key[1]))
                self.assertNotEqual(answer[0], 500, (name, key, answer))
            # A fork of it answers too, and the reset repairs what the test broke.
            fork = self.answers_within("POST", "/stores", {"from": store["id"]})
            self.assertIsNotNone(fork, name)
            self.assertNotEqual(fork[0], 500, (name, fork))
            os.unlink(path)
            reset = self.answers_within("POST", "/stores/%s/reset" % store["id"])
            self.assertEqual(reset[0], 200, (name, reset))
            self.assertEqual(self.answers_within("GET", "/stores/%s/counts" % store["id"])[0], 200)
        self.assertEqual(self.answers_within("GET", "/health")[0], 200)

    def test_a_fifo_beside_an_uploads_base_blocks_no_check(self):
        # An old database of the app's, uploaded; the test then plants FIFOs
        # beside the store's base before asking for the app check.
        store = self.upload("CREATE TABLE artists (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO artists (name) VALUES ('a');")
        directory = os.path.dirname(store["path"])
        for name in ["base.sqlite-shm", "base.sqlite-wal", "base.sqlite-journal"]:
            path = os.path.join(directory, name)
            if os.path.exists(path):
                os.unlink(path)
            os.mkfifo(path, 0o660)
            check = self.answers_within("POST", "/stores/%s/check" % store["id"],
                                        {"against": {"template": "gallery", "version": "latest"}, "snapshot": "v1.sqlite"})
            self.assertIsNotNone(check, "the check never answered with a FIFO as %s" % name)
            self.assertNotEqual(check[0], 500, check)
            self.others_are_served()
            os.unlink(path)

    def test_fifos_in_place_of_a_builds_files_block_nothing(self):
        for name in ["-shm", "-wal", "-journal"]:
            status, build, _ = self.larder.call("POST", "/builds", {"key": "fifo" + name})
            self.assertEqual(status, 201, build)
            db = sqlite3.connect(build["path"])
            db.execute("CREATE TABLE t (x)")
            db.execute("INSERT INTO t VALUES (1)")
            db.commit()
            db.close()
            path = build["path"] + name
            if os.path.exists(path):
                os.unlink(path)
            os.mkfifo(path, 0o660)
            finish = self.answers_within("POST", "/builds/%s/finish" % build["key"], {})
            self.assertIsNotNone(finish, "finish never answered with a FIFO as %s" % name)
            self.assertNotEqual(finish[0], 500, finish)
            self.others_are_served()
            # Discarded and built again, the key is not wedged.
            if finish[0] != 200:
                self.assertIn(self.answers_within("DELETE", "/builds/%s" % build["key"])[0], (204, 404))


class NestedViewTests(ServerCase):
    """A store whose test made a chain of views, each over the last: every
    read of its schema (the diff, the page, the artifact's diff) answers
    within its limit, never expanding each view to list the tables."""

    extra = ("--query-timeout-ms", "3000")

    def test_a_chain_of_views_leaves_every_read_within_its_limit(self):
        views = "".join("CREATE VIEW v%d AS SELECT * FROM %s;" % (i, "v%d" % (i - 1) if i else "t") for i in range(700))
        store = self.upload("CREATE TABLE t (id INTEGER PRIMARY KEY, a); INSERT INTO t (a) VALUES (1);" + views)
        db = sqlite3.connect(store["path"])
        db.execute("INSERT INTO t (a) VALUES (2)")
        db.commit()
        db.close()
        status, diff, _ = self.larder.call("GET", "/stores/%s/diff" % store["id"])
        self.assertEqual(status, 200, diff)
        self.assertEqual(diff["tables"]["t"]["inserted"], 1)
        for route in ("/page", "/artifact", "/schema", "/counts"):
            status, body, _ = self.larder.call("GET", "/stores/%s%s" % (store["id"], route), raw=True)
            self.assertEqual(status, 200, (route, body[:300]))


class LargeSchemaTests(ServerCase):
    """A store whose test made a schema of tens of MiB (long view SQL,
    wide tables with long names): its schema answer and its page stay
    within their byte budgets, and say where they stopped."""

    extra = ("--query-max-bytes", str(1 << 20))

    def test_the_schema_answer_and_the_page_stay_within_their_budgets(self):
        name = lambda i, j: "c%d_%d_" % (i, j) + "n" * 3000
        tables = "".join("CREATE TABLE t%d (%s); INSERT INTO t%d DEFAULT VALUES;" % (i, ", ".join('"%s"' % name(i, j) for j in range(100)), i)
                         for i in range(60))
        views = "".join("CREATE VIEW v%d AS SELECT '%s' AS x;" % (i, "v" * 200_000) for i in range(20))
        store = self.upload(tables + views)
        status, schema, _ = self.larder.call("GET", "/stores/%s/schema" % store["id"], raw=True)
        self.assertEqual(status, 200, schema[:300])
        self.assertLess(len(schema), (1 << 20) + (64 << 10), "the schema answer passed --query-max-bytes")
        answer = json.loads(schema)
        self.assertTrue(answer["truncated"])
        self.assertLess(len(answer["tables"]), 60)
        status, page, _ = self.larder.call("GET", "/stores/%s/page" % store["id"], raw=True)
        self.assertEqual(status, 200, page[:300])
        self.assertLess(len(page), 9 << 20, "the store page is unbounded")
        # A schema within the budget is whole, and says so.
        small = self.store()
        status, answer, _ = self.larder.call("GET", "/stores/%s/schema" % small["id"])
        self.assertEqual((status, answer["truncated"]), (200, False))
        self.assertIn("artworks", [t["name"] for t in answer["tables"]])


class CheckInTests(ServerCase):
    """PUT /stores/{id}/database (issue 47): a test's copy handed back. Every
    bad body is the contract's error, and leaves the store as it was."""
    extra = ("--max-body-bytes", str(2 << 20), "--busy-timeout-ms", "300")

    def copy_of(self, store, sql=None):
        """The store's database as a client checks it out, changed by `sql`."""
        status, data, _ = self.larder.call("GET", "/stores/%s/database" % store["id"])
        self.assertEqual(status, 200)
        path = os.path.join(scratch_folder(self, "larder-copy-"), "copy.sqlite")
        with open(path, "wb") as f:
            f.write(data)
        if sql:
            db = sqlite3.connect(path)
            db.executescript(sql)
            db.close()
        with open(path, "rb") as f:
            return f.read()

    def put(self, store, body, content_type="application/vnd.sqlite3", headers=None):
        return self.larder.call("PUT", "/stores/%s/database" % store["id"], body, content_type, headers=headers)

    def unchanged(self, store):
        status, diff, _ = self.larder.call("GET", "/stores/%s/diff" % store["id"])
        self.assertEqual(status, 200, diff)
        self.assertEqual(diff["tables"], {}, diff)
        self.assertEqual(self.larder.call("GET", "/stores/%s/counts" % store["id"])[1]["counts"]["artists"], 4)

    @staticmethod
    def zipped(files, method=None):
        import io
        import zipfile
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", method or zipfile.ZIP_DEFLATED) as z:
            for name, data in files:
                z.writestr(name, data)
        return out.getvalue()

    def test_bad_bodies_are_refused_and_leave_the_store_as_it_was(self):
        store = self.store()
        good = self.copy_of(store, "INSERT INTO artists (name) VALUES ('never');")
        cases = [
            ("no type", good, None, 415),
            ("json", b'{"sql": "DROP TABLE artists"}', "application/json", 415),
            ("empty", b"", "application/vnd.sqlite3", 400),
            ("text", b"DROP TABLE artists;" * 10, "application/vnd.sqlite3", 400),
            ("truncated", good[:4096 + 100], "application/vnd.sqlite3", 400),
            ("a zip with a way out", self.zipped([("../../../x.sqlite", good), ("x.sqlite-wal", b"")]), "application/zip", 400),
            ("a zip of two", self.zipped([("a.sqlite", good), ("b.sqlite", good)]), "application/zip", 400),
            ("a zip bomb", self.zipped([("a.sqlite", good + b"\0" * (16 << 20))]), "application/zip", 413),
            ("a broken zip", good[:100] + b"PK\x05\x06" + b"\0" * 18, "application/zip", 400),
        ]
        for what, body, content_type, status in cases:
            with self.subTest(what):
                got, answer, _ = self.put(store, body, content_type)
                self.assertEqual(got, status, (what, answer))
                self.assertIn("error", answer)
                self.assertNotIn(self.root, json.dumps(answer), "no server path in an error")
                self.unchanged(store)
        # Past --max-body-bytes: refused on its declared length, before a byte of it is read.
        status, out = self.raw(b"PUT /stores/%s/database HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/vnd.sqlite3\r\n"
                               b"Content-Length: %d\r\n\r\n" % (store["id"].encode(), 3 << 20))
        self.assertEqual(status, 413, out[:300])
        self.unchanged(store)
        self.assertEqual(self.put({"id": "st_" + "0" * 32}, good)[0], 404)
        self.assertEqual(os.listdir(os.path.join(self.root, "tmp")), [], "nothing left aside")
        # And the good one goes through.
        status, answer, _ = self.put(store, good)
        self.assertEqual((status, answer["counts"]["artists"]), (200, 5), answer)

    def test_a_write_transaction_held_is_409_with_retry_after(self):
        store = self.store()
        copy = self.copy_of(store, "DELETE FROM artists;")
        holder = sqlite3.connect(store["path"], isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        holder.execute("INSERT INTO artists (name) VALUES ('held')")
        status, answer, headers = self.put(store, copy)
        self.assertEqual((status, answer["error"]["code"]), (409, "conflict"), answer)
        self.assertIn("retry-after", {k.lower() for k in headers})
        holder.execute("ROLLBACK")
        holder.close()
        self.unchanged(store)
        self.assertEqual(self.put(store, copy)[0], 200)

    def test_what_a_copy_holds_runs_nowhere(self):
        """Triggers, an endless view and a function that is refused: checked
        in, counted and diffed without running any of them."""
        store = self.store()
        copy = self.copy_of(store, """
            CREATE TABLE log (x);
            CREATE TRIGGER spy AFTER INSERT ON artists BEGIN INSERT INTO log VALUES (load_extension('/tmp/x')); END;
            CREATE VIEW endless AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c;
            """)
        started = time.monotonic()
        status, answer, _ = self.put(store, copy)
        self.assertEqual(status, 200, answer)
        self.assertLess(time.monotonic() - started, 20, "the view was never read")
        self.assertEqual(answer["counts"]["log"], 0)
        status, diff, _ = self.larder.call("GET", "/stores/%s/diff" % store["id"])
        self.assertEqual(status, 200, diff)
        self.assertEqual(sorted(change["name"] for change in diff["schema"]["added"]), ["endless", "log", "spy"], diff)

    def test_a_store_file_linked_to_another_stores_writes_only_its_own(self):
        """A test that made its store.sqlite a link to another suite's store:
        its check-in never reaches the other store."""
        mine, theirs = self.store(), self.store()
        copy = self.copy_of(mine, "DELETE FROM artists;")
        os.unlink(mine["path"])
        os.symlink(theirs["path"], mine["path"])
        status, answer, _ = self.put(mine, copy)
        self.assertNotEqual(status, 500, answer)
        self.unchanged(theirs)

    def test_check_ins_racing_resets_are_each_whole(self):
        store = self.store()
        copy = self.copy_of(store, "INSERT INTO artists (name) VALUES ('copy');")
        statuses = []
        def work(i):
            if i % 2:
                statuses.append(self.put(store, copy)[0])
            else:
                statuses.append(self.larder.call("POST", "/stores/%s/reset" % store["id"])[0])
        threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertTrue(set(statuses) <= {200, 409}, statuses)
        artists = self.larder.call("GET", "/stores/%s/counts" % store["id"])[1]["counts"]["artists"]
        self.assertIn(artists, (4, 5))
        db = sqlite3.connect(store["path"])
        self.assertEqual(db.execute("PRAGMA integrity_check").fetchone()[0], "ok")
        db.close()


class TokenTests(unittest.TestCase):
    def test_routes_cannot_be_probed_without_the_token(self):
        root = fresh_root("larder-hostile-")
        larder = Larder(root, "--token", "s3cret")
        try:
            for method, path in [("GET", "/no/such/route"), ("DELETE", "/templates"), ("GET", "/stores/st_x")]:
                status, body, _ = larder.call(method, path)
                self.assertEqual((status, body["error"]["code"]), (401, "unauthorized"), path)
            self.assertEqual(larder.call("HEAD", "/health")[0], 200)
        finally:
            larder.stop()
            shutil.rmtree(root, ignore_errors=True)


def database_bytes(directory, mebibytes):
    """The bytes of a SQLite database of about `mebibytes` MiB."""
    path = os.path.join(directory, "big-%d.sqlite" % mebibytes)
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE blobs (b BLOB)")
    db.executemany("INSERT INTO blobs VALUES (zeroblob(65536))", [()] * (mebibytes * 16))
    db.commit()
    db.close()
    with open(path, "rb") as f:
        return f.read()


def bytes_under(directory):
    total = 0
    for parent, _, files in os.walk(directory):
        for name in files:
            total += os.lstat(os.path.join(parent, name)).st_size
    return total


class DiskQuotaTests(unittest.TestCase):
    """--max-disk-bytes counts what a store really costs (its own base,
    ready copies, copies and builds under way, the trash), before copying."""

    QUOTA = 24 << 20

    def setUp(self):
        self.scratch = scratch_folder(self, "larder-quota-")
        self.root = os.path.join(self.scratch, "root")
        self.larder = Larder(self.root, "--max-disk-bytes", str(self.QUOTA))
        self.addCleanup(self.larder.stop)

    def on_disk(self):
        """What stores, ready copies and builds take (the cache has its own budget)."""
        return sum(bytes_under(os.path.join(self.root, d)) for d in ("stores", "ready", "builds", "building"))

    def test_uploads_forks_and_builds_stay_within_the_quota(self):
        # An upload larger than the quota is refused before it is stored.
        status, body, _ = self.larder.call("POST", "/stores", database_bytes(self.scratch, 32), "application/vnd.sqlite3")
        self.assertEqual((status, body["error"]["code"]), (429, "quota_exceeded"), body)
        self.assertEqual(os.listdir(os.path.join(self.root, "stores")), [])
        status, source, _ = self.larder.call("POST", "/stores", database_bytes(self.scratch, 4), "application/vnd.sqlite3")
        self.assertEqual(status, 201, source)

        # Forks made at once are counted together, not each against the room before them.
        statuses = []
        def fork():
            statuses.append(self.larder.call("POST", "/stores", {"from": source["id"]})[0])
        threads = [threading.Thread(target=fork) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertIn(429, statuses)
        self.assertTrue(set(statuses) <= {201, 429}, statuses)
        self.assertLessEqual(self.on_disk(), self.QUOTA)

        # A store refused with 429 makes no ready copies of its template in the background either.
        for _ in range(6):
            self.larder.call("POST", "/stores", {"template": "gallery"})
        wait_until(lambda: self.on_disk() > self.QUOTA, 0.5)
        self.assertLessEqual(self.on_disk(), self.QUOTA)

        # What a builder writes counts: a claim and a store past it are 429.
        for store in self.larder.call("GET", "/stores?limit=1000")[1]["stores"]:
            self.larder.call("DELETE", "/stores/" + store["id"])
        status, build, _ = self.larder.call("POST", "/builds", {"key": "bloat"})
        self.assertEqual(status, 201, build)
        db = sqlite3.connect(build["path"])
        db.execute("CREATE TABLE blobs (b BLOB)")
        db.executemany("INSERT INTO blobs VALUES (zeroblob(65536))", [()] * (26 * 16))
        db.commit()
        db.close()
        status, body, _ = self.larder.call("POST", "/stores", {"template": "gallery"})
        self.assertEqual((status, body["error"]["code"]), (429, "quota_exceeded"), body)
        status, body, _ = self.larder.call("POST", "/builds", {"key": "another"})
        self.assertEqual((status, body["error"]["code"]), (429, "quota_exceeded"), body)
        self.assertEqual(self.larder.call("DELETE", "/builds/bloat")[0], 204)
        # The trash removes the build's file in the background: a store fits once it has.
        wait_until(lambda: self.larder.call("POST", "/stores", {"template": "gallery"})[0] == 201, 30)
        self.assertEqual(self.larder.call("POST", "/stores", {"template": "gallery"})[0], 201)

    def test_sqlites_temporary_files_stay_within_the_quota(self):
        # A client's query that sorts spills to SQLite's temporary files: they count, and they stay in the root.
        status, store, _ = self.larder.call("POST", "/stores", {"template": "gallery"})
        self.assertEqual(status, 201, store)
        spill = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 400000) "
                 "SELECT x, randomblob(100) AS b FROM c ORDER BY b")
        status, body, _ = self.larder.call("POST", "/stores/%s/query" % store["id"], {"sql": spill})
        self.assertEqual((status, body["error"]["code"]), (429, "quota_exceeded"), body)
        self.assertIn("temporary files", body["error"]["message"])
        # Nothing is held after: the quota is whole again, and small work goes on.
        self.assertLess(self.larder.metric("larder_quota_used_bytes"), self.QUOTA // 2)
        status, body, _ = self.larder.call("POST", "/stores/%s/query" % store["id"], {"sql": spill.replace("400000", "2000")})
        self.assertEqual(status, 200, body)
        self.assertEqual(self.larder.call("POST", "/stores", {"template": "gallery"})[0], 201)


class FullDiskTests(unittest.TestCase):
    """A small tmpfs as the root: when it fills, 507 and nothing half-made;
    once space is freed, everything answers again without a restart."""

    def setUp(self):
        self.mount = tempfile.mkdtemp(prefix="larder-full-")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", self.mount], capture_output=True)
        if done.returncode != 0:
            os.rmdir(self.mount)
            self.skipTest("cannot mount a tmpfs here: %s" % done.stderr.decode().strip())

    def tearDown(self):
        subprocess.run(["umount", "-l", self.mount])
        os.rmdir(self.mount)

    def test_full_disk_is_507_and_heals(self):
        larder = Larder(os.path.join(self.mount, "root"), "--max-stores", "100000")
        try:
            made, statuses = [], {}
            for i in range(400):
                status, body, _ = larder.call("POST", "/stores", {"template": "gallery", "fixtures": ["artists", "artworks"]})
                statuses[status] = statuses.get(status, 0) + 1
                if status == 201:
                    made.append(body)
                    if i % 3 == 0:  # writes into live stores too
                        larder.call("POST", "/stores/%s/query" % body["id"], {"sql": "CREATE TABLE pad AS SELECT randomblob(20000) FROM artworks"})
                else:
                    self.assertEqual((status, body["error"]["code"]), (507, "insufficient_storage"), body)
            self.assertIn(507, statuses, statuses)
            self.assertNotIn(500, statuses)
            root = os.path.join(self.mount, "root")
            self.assertEqual(half_made(root), [])
            # Free space, then every store answers again: no restart.
            for store in made[: len(made) // 2]:
                self.assertEqual(larder.call("DELETE", "/stores/" + store["id"])[0], 204)
            status, listing, _ = larder.call("GET", "/stores?limit=10000")
            self.assertEqual(status, 200, listing)
            for store in made[len(made) // 2:]:
                status, counts, _ = larder.call("GET", "/stores/%s/counts" % store["id"])
                self.assertEqual(status, 200, (store["id"], counts))
                self.assertEqual(counts["counts"]["artworks"], 12)
            # Ready copies do not take the freed room back.
            for _ in range(10):
                self.assertEqual(larder.call("POST", "/stores", {"template": "gallery"})[0], 201)
        finally:
            larder.stop()

    def test_a_full_disk_is_given_back_by_idle_connections_and_deletions(self):
        """An 8 MiB root filled with stores that tests read: idle pooled
        connections must not hold their stores' -shm, or deleting stores frees no room."""
        root = os.path.join(self.mount, "root")
        larder = Larder(root, "--max-stores", "100000", "--pool-size", "0")
        try:
            made = []
            while True:
                status, body, _ = larder.call("POST", "/stores", {"template": "gallery", "fixtures": ["artists", "artworks"]})
                if status != 201:
                    self.assertEqual((status, body["error"]["code"]), (507, "insufficient_storage"), body)
                    break
                made.append(body)
                self.assertLess(len(made), 1000, "the disk never filled")
                status, counts, _ = larder.call("GET", "/stores/%s/counts" % body["id"])
                if status != 200:
                    self.assertEqual(status, 507, counts)
            shm = [name for name in os.listdir(os.path.join(root, "stores")) if os.path.exists(os.path.join(root, "stores", name, "store.sqlite-shm"))]
            # (The read that met the full disk may leave its -shm half made: SQLite keeps it for the next one to open the store.)
            self.assertLessEqual(len(shm), 1, "a full disk, and idle connections still hold their stores' -shm: %s" % shm)
            for store in made[: len(made) // 2]:
                self.assertEqual(larder.call("DELETE", "/stores/" + store["id"])[0], 204)
            # At once: the room the deletions freed is there for reads and new stores.
            for _ in range(3):
                for store in made[len(made) // 2:]:
                    status, counts, _ = larder.call("GET", "/stores/%s/counts" % store["id"])
                    self.assertEqual(status, 200, (store["id"], counts))
            for _ in range(5):
                status, body, _ = larder.call("POST", "/stores", {"template": "gallery", "fixtures": ["artists", "artworks"]})
                self.assertEqual(status, 201, body)
        finally:
            larder.stop()


if __name__ == "__main__":
    run_tests("hostile")
