#!/usr/bin/env python3
"""Reaching stores as tests in CI do: as another user than the server, through
a root mounted elsewhere, while holding a write transaction, from long polls
that give up, with one CI run's stores removed at once, and with `larder
check` refusing to pass when there is nothing to check.

    python3 Tests/blackbox/test_reach.py .build/debug/larder

The other-user tests run the test side with `setpriv` as `nobody`; they need
root (as CI machines here have) and are skipped otherwise.
"""
import grp
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from processes import SYSTEM_PYTHON, open_descriptors, run_tests, scratch_folder, wait_until  # noqa: E402
from test_client import BINARY, FIXTURES, Larder  # noqa: E402  (the same server harness)

# What the other user runs: open the store with its own driver, read, write, commit.
WRITER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=2)
before = db.execute("SELECT count(*) FROM artists").fetchone()[0]
db.execute("INSERT INTO artists (name) VALUES ('written by another user')")
db.commit()
print(before)
"""


def as_nobody(path, groups=()):
    """Runs WRITER as nobody:nogroup with only `groups` besides; answers the process."""
    command = ["setpriv", "--reuid=nobody", "--regid=nogroup"]
    command += ["--groups=" + ",".join(str(g) for g in groups)] if groups else ["--clear-groups"]
    return subprocess.run(command + [SYSTEM_PYTHON, "-c", WRITER, path], capture_output=True, text=True, timeout=30)


class Scratch(unittest.TestCase):
    """A scratch directory that other users may pass through (mkdtemp's is 0700)."""

    def setUp(self):
        self.scratch = scratch_folder(self, "larder-reach-", mode=0o755)
        self.servers = []

    def tearDown(self):
        for server in self.servers:
            if server.process.poll() is None:
                server.stop()

    def serve(self, *extra, root="root"):
        server = Larder(os.path.join(self.scratch, root), *extra)
        self.servers.append(server)
        return server


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv") and SYSTEM_PYTHON,
                     "needs root, setpriv and a system python to act as another user")
class OtherUserTests(Scratch):
    def make(self, larder):
        status, store, _ = larder.call("POST", "/stores", {"template": "gallery", "fixtures": ["artists"]})
        self.assertEqual(status, 201, store)
        # The server keeps a reader open, as it does once anything asked for counts.
        self.assertEqual(larder.call("GET", "/stores/%s/counts" % store["id"])[0], 200)
        return store

    def artists(self, larder, store):
        return larder.call("GET", "/stores/%s/counts?tables=artists" % store["id"])[1]["counts"]["artists"]

    def test_mode_0666_lets_any_user_read_and_write(self):
        larder = self.serve("--store-mode", "0666")
        store = self.make(larder)
        before = self.artists(larder, store)
        done = as_nobody(store["path"])
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(int(done.stdout), before)
        self.assertEqual(self.artists(larder, store), before + 1)
        for suffix in ["", "-wal", "-shm"]:
            self.assertEqual(os.stat(store["path"] + suffix).st_mode & 0o777, 0o666, suffix)
        # Larder goes on writing the store the other user wrote.
        status, body, _ = larder.call("POST", "/stores/%s/fixtures" % store["id"], {"sql": "INSERT INTO artists (name) VALUES ('larder')"})
        self.assertEqual(status, 200, body)
        self.assertEqual(larder.call("DELETE", "/stores/%s" % store["id"])[0], 204)
        self.assertFalse(os.path.exists(os.path.dirname(store["path"])), "the other user's files went too")

    def test_mode_0660_with_a_group_lets_its_members_in_and_no_one_else(self):
        group = grp.getgrnam("users").gr_gid
        larder = self.serve("--store-mode", "0660", "--store-group", "users")
        store = self.make(larder)
        directory = os.stat(os.path.dirname(store["path"]))
        self.assertEqual(directory.st_mode & 0o7777, 0o2770)
        self.assertEqual(directory.st_gid, group)
        outsider = as_nobody(store["path"])
        self.assertNotEqual(outsider.returncode, 0, "nobody outside the group is refused")
        member = as_nobody(store["path"], groups=[group])
        self.assertEqual(member.returncode, 0, member.stderr)
        for suffix in ["", "-wal", "-shm"]:
            info = os.stat(store["path"] + suffix)
            self.assertEqual((info.st_mode & 0o777, info.st_gid), (0o660, group), suffix)

    def test_default_mode_lets_the_servers_group_in_and_no_one_else(self):
        larder = self.serve()
        store = self.make(larder)
        self.assertEqual(os.stat(store["path"]).st_mode & 0o777, 0o660)
        self.assertEqual(os.stat(os.path.dirname(store["path"])).st_mode & 0o777, 0o770)
        member = as_nobody(store["path"], groups=[os.getgid()])
        self.assertEqual(member.returncode, 0, member.stderr)
        outsider = as_nobody(store["path"])
        self.assertNotEqual(outsider.returncode, 0, "an outsider cannot even read")
        # The passages can be walked through to a path one was given, never listed.
        root = os.path.dirname(os.path.dirname(os.path.dirname(store["path"])))
        for directory in (root, os.path.join(root, "stores"), os.path.join(root, "builds")):
            self.assertEqual(os.stat(directory).st_mode & 0o777, 0o710, directory)
        lister = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--groups=%d" % os.getgid(), SYSTEM_PYTHON, "-c",
                                 "import os, sys; os.listdir(sys.argv[1])", os.path.join(root, "stores")], capture_output=True, text=True, timeout=30)
        self.assertNotEqual(lister.returncode, 0, "a member cannot list the stores")
        self.assertIn("PermissionError", lister.stderr)


    def test_a_member_of_the_group_lists_no_place_that_shows_another_suites_ids(self):
        # The ids are the only secret between suites: a test user in the
        # store group may walk to a store it was given, never list a folder
        # that stores, builds or copies pass through, nor read the cache.
        group = grp.getgrnam("users").gr_gid
        larder = self.serve("--store-group", "users")
        store = self.make(larder)
        self.assertEqual(larder.call("POST", "/stores", {"from": store["id"]})[0], 201)
        status, build, _ = larder.call("POST", "/builds", {"key": "secret-build"})
        self.assertEqual(status, 201, build)
        root = os.path.dirname(os.path.dirname(os.path.dirname(store["path"])))
        lister = """
import os, sys
listed = []
for top in sys.argv[1:]:
    for folder, names, files in os.walk(top, onerror=lambda e: None):
        listed += [os.path.join(folder, n) for n in names + files]
print("\\n".join(listed))
"""
        places = [os.path.join(root, name) for name in ("stores", "building", "tmp", "trash", "cache", "builds")] + [root]
        done = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--groups=%d" % group, SYSTEM_PYTHON, "-c", lister]
                              + places, capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertNotIn("st_", done.stdout, "a member listed a store's id")
        self.assertNotIn("secret-build", done.stdout)
        self.assertNotIn(".sqlite", done.stdout, "a member listed a database")
        # The store it was given is still its own to open.
        member = as_nobody(store["path"], groups=[group])
        self.assertEqual(member.returncode, 0, member.stderr)
        for name in ("building", "tmp", "trash", "cache"):
            self.assertEqual(os.stat(os.path.join(root, name)).st_mode & 0o777, 0o700, name)


class KeepAfterDownloadTests(Scratch):
    def test_keeping_a_store_the_test_wrote_after_a_download_answers_200(self):
        # An upload, its download, the test's own insert through its driver
        # (another process), fixtures, a fork, then the keep that every
        # client sends for a failed test: a download's copy must leave the
        # server's SQLite locks on the live file, or the driver removes its WAL.
        larder = self.serve()
        source = os.path.join(self.scratch, "library.sqlite")
        db = sqlite3.connect(source)
        db.executescript("""CREATE TABLE library_book (id INTEGER PRIMARY KEY, data TEXT CHECK (json_valid(data)), title TEXT);
            CREATE INDEX book_title ON library_book (json_extract(data, '$.title'));
            INSERT INTO library_book (data, title) VALUES ('{"title": "a"}', 'a');""")
        db.commit()
        db.close()
        large = os.path.join(self.scratch, "large.sqlite")
        shutil.copy(source, large)
        db = sqlite3.connect(large)
        db.execute("CREATE TABLE blobs (b BLOB)")
        db.executemany("INSERT INTO blobs VALUES (randomblob(4096))", [()] * 600)  # its base is copied after the answer
        db.commit()
        db.close()
        for route, source in (("/database", source), ("/artifact", source), ("/database", large)):
            with open(source, "rb") as f:
                status, store, _ = larder.call("POST", "/stores", f.read(), "application/vnd.sqlite3")
            self.assertEqual(status, 201, store)
            self.assertEqual(larder.call("GET", "/stores/%s%s" % (store["id"], route), raw=True)[0], 200)
            own = subprocess.run([sys.executable, "-c", """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("INSERT INTO library_book (data, title) VALUES ('{\\"title\\": \\"b\\"}', 'b')")
db.commit()
db.close()
""", store["path"]], capture_output=True, text=True, timeout=30)
            self.assertEqual(own.returncode, 0, own.stderr)
            status, body, _ = larder.call("POST", "/stores/%s/fixtures" % store["id"],
                                          {"rows": {"library_book": [{"data": '{"title": "c"}', "title": "c"}]}})
            self.assertEqual(status, 200, body)
            status, body, _ = larder.call("POST", "/stores/%s/fixtures" % store["id"],
                                          {"sql": "INSERT INTO library_book (data, title) VALUES ('{\"title\": \"d\"}', 'd')"})
            self.assertEqual(status, 200, body)
            self.assertEqual(larder.call("POST", "/stores", {"from": store["id"]})[0], 201)
            status, body, _ = larder.call("PATCH", "/stores/%s" % store["id"], {"keep": True})
            self.assertEqual(status, 200, (route, body))
            self.assertEqual(body["counts"]["library_book"], 4)
            self.assertTrue(os.path.exists(store["path"] + "-shm"), "the server's connections lost their -shm")


class ClientRootTests(Scratch):
    def test_paths_are_built_from_the_client_root(self):
        # The tests' view of the root: here a link, in CI a volume mounted elsewhere.
        view = os.path.join(self.scratch, "as-the-tests-see-it")
        os.makedirs(os.path.join(self.scratch, "root"))
        os.symlink(os.path.join(self.scratch, "root"), view)
        larder = self.serve("--client-root", view + "/")
        status, store, _ = larder.call("POST", "/stores", {"template": "gallery"})
        self.assertEqual(status, 201)
        self.assertEqual(store["path"], "%s/stores/%s/store.sqlite" % (view, store["id"]))
        db = sqlite3.connect(store["path"])
        db.execute("INSERT INTO artists (name) VALUES ('through the client root')")
        db.commit()
        db.close()
        self.assertEqual(larder.call("GET", "/stores/%s/counts?tables=artists" % store["id"])[1]["counts"]["artists"], 1)
        self.assertEqual(larder.call("GET", "/stores?limit=1")[1]["stores"][0]["path"], store["path"])


class BusyStoreTests(Scratch):
    def test_a_held_write_transaction_is_409_with_retry_after_then_works(self):
        larder = self.serve("--busy-timeout-ms", "300")
        _, store, _ = larder.call("POST", "/stores", {"template": "gallery", "version": "1"})
        db = sqlite3.connect(store["path"], isolation_level=None)
        db.execute("BEGIN IMMEDIATE")
        db.execute("CREATE TABLE held_by_the_test (x)")
        writes = [("/fixtures", {"fixtures": ["artists"]}),
                  ("/fixtures", {"sql": "INSERT INTO artists (name) VALUES ('x')"}),
                  ("/migrate", {"to": "latest"}),
                  ("/query", {"sql": "INSERT INTO artists (name) VALUES ('x')"})]
        for path, body in writes:
            started = time.time()
            status, error, headers = larder.call("POST", "/stores/%s%s" % (store["id"], path), body)
            self.assertEqual((status, error["error"]["code"]), (409, "conflict"), (path, error))
            self.assertEqual(headers.get("Retry-After"), "1")
            self.assertLess(time.time() - started, 3, "a short busy wait, not the operation's whole time limit")
        # Reads go on meanwhile (WAL).
        self.assertEqual(larder.call("GET", "/stores/%s/counts" % store["id"])[0], 200)
        db.execute("COMMIT")
        for path, body in writes:
            status, answer, _ = larder.call("POST", "/stores/%s%s" % (store["id"], path), body)
            self.assertEqual(status, 200, (path, answer))
        self.assertNotIn('"status":500', larder.log_text())


class LongPollTests(Scratch):
    def test_abandoned_long_polls_release_their_connections_at_once(self):
        # No ready copies: their background refill opens and closes files
        # while the descriptors are counted.
        larder = self.serve("--log-format", "json", "--pool-size", "0")
        _, store, _ = larder.call("POST", "/stores", {"template": "gallery"})
        fds = lambda: open_descriptors(larder.pid)  # noqa: E731
        waits = lambda: larder.metric("larder_count_waits")  # noqa: E731
        # Read once first so the store's pooled readers are counted in the baseline.
        self.assertEqual(larder.call("GET", "/stores/%s/counts?wait=artists=0&timeout_ms=1000" % store["id"])[0], 200)
        # The server closes that call's connection when it sees it closed:
        # the baseline is taken once the count holds still, without that socket.
        counts = []

        def held_still():
            counts.append(fds())
            return len(counts) > 1 and counts[-1] == counts[-2]
        wait_until(held_still, 2)
        baseline = counts[-1]
        host, port = larder.address.split(":")
        sockets = []
        for _ in range(40):
            s = socket.create_connection((host, int(port)))
            s.sendall(("GET /stores/%s/counts?wait=artists>=1000&timeout_ms=60000 HTTP/1.1\r\nHost: %s\r\n\r\n" % (store["id"], host)).encode())
            sockets.append(s)
        wait_until(lambda: waits() >= 40, interval=0.02)
        self.assertEqual(waits(), 40)
        self.assertGreaterEqual(fds(), baseline + 40)
        for s in sockets:
            s.close()
        # Slack for read connections the burst added to the store's pool (up to 4, 3 descriptors each).
        wait_until(lambda: waits() == 0 and fds() <= baseline + 12, interval=0.02)
        self.assertEqual(waits(), 0, "every wait was dropped")
        self.assertLessEqual(fds(), baseline + 12, "their sockets and the store's watch were released")
        # Each is logged as 499 once its hangup is handled: waited for, not counted at once.
        dropped = lambda: [line for line in larder.log_text().splitlines() if '"status":"499"' in line or '"status":499' in line]  # noqa: E731
        wait_until(lambda: len(dropped()) >= 40, interval=0.02)
        self.assertEqual(len(dropped()), 40, "each is logged as 499, client closed request")
        # The store still answers waits.
        status, body, _ = larder.call("GET", "/stores/%s/counts?wait=artists=0&timeout_ms=1000" % store["id"])
        self.assertEqual(status, 200, body)


class BulkDeleteTests(Scratch):
    def test_one_ci_runs_stores_go_at_once(self):
        larder = self.serve()
        ids = {}
        for label in ["run-7/test_a", "run-7/test_b", "run-8/test_a", "run-7"]:
            ids[label] = larder.call("POST", "/stores", {"label": label})[1]["id"]
        larder.call("PATCH", "/stores/%s" % ids["run-7/test_b"], {"keep": True})
        status, page, _ = larder.call("GET", "/stores?label_prefix=run-7/")
        self.assertEqual(status, 200)
        self.assertEqual(sorted(s["label"] for s in page["stores"]), ["run-7/test_a", "run-7/test_b"])
        status, body, _ = larder.call("DELETE", "/stores?label_prefix=run-7/")
        self.assertEqual((status, body), (200, {"deleted": 2}), "kept ones too")
        self.assertEqual(larder.call("DELETE", "/stores?label=run-7")[1], {"deleted": 1})
        status, error, _ = larder.call("DELETE", "/stores")
        self.assertEqual((status, error["error"]["code"]), (400, "bad_request"))
        self.assertEqual([s["label"] for s in larder.call("GET", "/stores")[1]["stores"]], ["run-8/test_a"])


class CheckRefusesNothingTests(Scratch):
    def check(self, *arguments):
        return subprocess.run([BINARY, "check", *arguments], capture_output=True, text=True, timeout=120)

    def test_nothing_to_check_exits_2_with_a_message(self):
        empty = os.path.join(self.scratch, "empty")
        os.makedirs(empty)
        plain = os.path.join(self.scratch, "plain")
        os.makedirs(os.path.join(plain, "notes", "migrations"))
        with open(os.path.join(plain, "notes", "migrations", "001_init.sql"), "w") as f:
            f.write("CREATE TABLE notes (id INTEGER PRIMARY KEY);\n")
        for arguments, words in [(["--fixtures", os.path.join(self.scratch, "missing")], "does not exist"),
                                 (["--fixtures", empty], "no template"),
                                 (["--fixtures", plain], "snapshots"),
                                 (["--fixtures", plain, "--template", "notes"], "'notes' has no snapshots"),
                                 (["--fixtures", FIXTURES, "--template", "nosuch"], "no template 'nosuch'")]:
            done = self.check(*arguments)
            self.assertEqual(done.returncode, 2, (arguments, done.stdout, done.stderr))
            self.assertIn(words, done.stderr, arguments)
        self.assertEqual(self.check("--fixtures", FIXTURES).returncode, 0)

    def test_a_migration_that_drops_a_column_with_data_fails_naming_it(self):
        fixtures = os.path.join(self.scratch, "dropping")
        migrations = os.path.join(fixtures, "ads", "migrations")
        os.makedirs(migrations)
        os.makedirs(os.path.join(fixtures, "ads", "snapshots"))
        with open(os.path.join(migrations, "0001_campaigns.sql"), "w") as f:
            f.write("CREATE TABLE campaigns (id INTEGER PRIMARY KEY, name TEXT, url TEXT);\n")
        with open(os.path.join(migrations, "0002_no_url.sql"), "w") as f:
            f.write("ALTER TABLE campaigns DROP COLUMN url;\n")
        for name in ("v1", "v1b"):
            db = sqlite3.connect(os.path.join(fixtures, "ads", "snapshots", name + ".sqlite"))
            db.executescript("CREATE TABLE campaigns (id INTEGER PRIMARY KEY, name TEXT, url TEXT);"
                             "INSERT INTO campaigns VALUES (1, 'a', 'https://a'), (2, 'b', 'https://b'), (3, 'c', 'https://c');"
                             "PRAGMA user_version = 1;")
            db.close()
        junit = os.path.join(self.scratch, "checks.xml")
        done = self.check("--fixtures", fixtures, "--junit", junit)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        message = "campaigns.url held 3 non-NULL values; the migrated store has no column url"
        self.assertIn(message, done.stdout)
        with open(junit) as f:
            self.assertIn(message, f.read())
        lines = [line.split(" (")[0] for line in done.stdout.splitlines() if line.startswith(("PASS", "FAIL"))]
        self.assertEqual(lines, ["FAIL ads/v1", "FAIL ads/v1b"], "in the JUnit report's order, every run")
        self.assertEqual(self.check("--fixtures", fixtures, "--no-data-check").returncode, 0)
        # Declared on purpose: it passes.
        with open(os.path.join(fixtures, "ads", "snapshots", "v1.expect.json"), "w") as f:
            json.dump({"drops": ["campaigns.url"]}, f)
        done = self.check("--fixtures", fixtures)
        self.assertIn("PASS ads/v1 (1 → 2)", done.stdout)
        larder = self.serve("--fixtures", fixtures, root="root-dropping")
        status, report, _ = larder.call("GET", "/checks/migrations")
        self.assertEqual((status, report["passed"], report["failed"]), (422, 1, 1), report)
        self.assertEqual(larder.call("GET", "/checks/migrations?data=false")[0], 200)

    def test_the_server_answers_404_and_400_likewise(self):
        # A fixtures folder that is not there yet (a CI service that starts before the checkout).
        larder = self.serve("--fixtures", os.path.join(self.scratch, "missing"), "--missing-fixtures", "wait", root="root-missing")
        status, error, _ = larder.call("GET", "/checks/migrations")
        self.assertEqual((status, error["error"]["code"]), (404, "not_found"), error)
        os.makedirs(os.path.join(self.scratch, "empty"))
        larder = self.serve("--fixtures", os.path.join(self.scratch, "empty"), root="root-empty")
        status, error, _ = larder.call("GET", "/checks/migrations?format=junit")
        self.assertEqual((status, error["error"]["code"]), (400, "bad_request"), error)


if __name__ == "__main__":
    run_tests("reach")
