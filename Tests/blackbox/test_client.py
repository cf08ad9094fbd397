#!/usr/bin/env python3
"""Client tests in another language: what a CI job in Python does with
Larder, against the real binary, with the standard library only.

    python3 Tests/blackbox/test_client.py .build/debug/larder
"""
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import unittest
import zipfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from calls import download  # noqa: E402
from processes import (FIXTURES, REPO, Server, clean_environment, fresh_root, half_made, larder_binary,  # noqa: E402
                       open_descriptors, run_tests, scratch_folder, wait_until)

BINARY = larder_binary()


class Larder(Server):
    """The server as a subprocess on a free port, its log in a file (the harness of every black-box test)."""

    def __init__(self, root, *extra, fixtures=FIXTURES):
        self.root = root
        super().__init__(BINARY, root, fixtures, *extra)


def commit_loop(path, seconds, statements):
    """Another process that commits `statements` (each given the commit's
    number as its one parameter) in one transaction, again and again."""
    return subprocess.Popen([sys.executable, "-c", """
import json, sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], timeout=5, isolation_level=None)
end = time.time() + float(sys.argv[2])
i = 0
while time.time() < end:
    db.execute("BEGIN IMMEDIATE")
    for statement in json.loads(sys.argv[3]):
        db.execute(statement, (i,))
    db.execute("COMMIT")
    i += 1
""", path, str(seconds), json.dumps(statements)])


def rows(path, table):
    """The rows of `table` in the database at `path`, as another reader sees them."""
    db = sqlite3.connect(path, timeout=5)
    try:
        return db.execute('SELECT count(*) FROM "%s"' % table).fetchone()[0]
    finally:
        db.close()


def atlas_sum(files):
    """atlas.sum for {name: text} as `atlas migrate hash` writes it (sql/migrate/dir.go):
    each file's hash runs over every name and content before it, the first line over names and hashes."""
    import base64
    running, lines, total = hashlib.sha256(), [], hashlib.sha256()
    for name in sorted(files, key=lambda n: n.encode()):
        running.update(name.encode())
        running.update(files[name].encode())
        digest = base64.b64encode(running.copy().digest()).decode()
        lines.append("%s h1:%s\n" % (name, digest))
        total.update(name.encode() + digest.encode())
    return "h1:%s\n" % base64.b64encode(total.digest()).decode() + "".join(lines)


class ClientTests(unittest.TestCase):
    def setUp(self):
        self.root = fresh_root("larder-client-")
        self.larder = Larder(self.root)

    def tearDown(self):
        if self.larder.process.poll() is None:
            self.larder.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def test_create_write_count_delete(self):
        status, store, _ = self.larder.call("POST", "/stores", {"template": "gallery", "fixtures": ["artists", "artworks"], "label": "py"})
        self.assertEqual(status, 201)
        db = sqlite3.connect(store["path"])
        db.execute("INSERT INTO albums (title) VALUES ('written by python')")
        db.commit()
        status, counts, _ = self.larder.call("GET", "/stores/%s/counts" % store["id"])
        self.assertEqual(counts["counts"]["albums"], 1)
        self.assertEqual(counts["counts"]["artworks"], 12)
        db.close()
        status, _, _ = self.larder.call("DELETE", "/stores/%s" % store["id"])
        self.assertEqual(status, 204)
        self.assertFalse(os.path.exists(store["path"]))

    def test_wait_is_released_by_a_write_from_this_process(self):
        _, store, _ = self.larder.call("POST", "/stores", {"template": "gallery"})

        def write_later():
            # Once the server holds the wait: the write must be what releases it.
            wait_until(lambda: self.larder.metric("larder_count_waits"))
            db = sqlite3.connect(store["path"])
            db.executemany("INSERT INTO albums (title) VALUES (?)", [("a",), ("b",), ("c",)])
            db.commit()
            db.close()
        threading.Thread(target=write_later).start()
        start = time.time()
        status, body, _ = self.larder.call("GET", "/stores/%s/counts?wait=albums>=3,artists=0&timeout_ms=10000" % store["id"])
        self.assertEqual(status, 200)
        self.assertEqual(body["counts"]["albums"], 3)
        self.assertLess(time.time() - start, 3)
        status, body, _ = self.larder.call("GET", "/stores/%s/counts?wait=albums<3&timeout_ms=300" % store["id"])
        self.assertEqual((status, body["error"]["code"]), (408, "timeout"))
        self.assertEqual(body["error"]["details"]["counts"]["albums"], 3)

    def test_openapi_document_is_valid(self):
        try:
            from openapi_spec_validator import validate
        except ImportError:
            self.skipTest("openapi-spec-validator is not installed")
        status, document, _ = self.larder.call("GET", "/openapi.json")
        self.assertEqual(status, 200)
        validate(document)

    def test_empty_store_is_a_sqlite_file(self):
        status, store, _ = self.larder.call("POST", "/stores")
        self.assertEqual(status, 201)
        db = sqlite3.connect(store["path"])
        self.assertEqual(db.execute("PRAGMA journal_mode").fetchone()[0], "wal")
        db.execute("CREATE TABLE t (x)")
        db.commit()
        self.assertEqual(self.larder.call("GET", "/stores/%s" % store["id"])[1]["counts"], {"t": 0})

    def test_bad_inputs(self):
        for body, code in [(b"{", "bad_request"), (b'{"nope": 1}', "bad_request"), (b'{"ttl_seconds": "x"}', "bad_request")]:
            status, error, _ = self.larder.call("POST", "/stores", body)
            self.assertEqual(status, 400)
            self.assertEqual(error["error"]["code"], code)
        status, error, _ = self.larder.call("POST", "/stores", b"not a database", "application/vnd.sqlite3")
        self.assertEqual((status, error["error"]["code"]), (400, "bad_request"))
        self.assertEqual(self.larder.call("GET", "/stores/st_none")[1]["error"]["code"], "store_not_found")
        self.assertEqual(self.larder.call("PUT", "/stores")[0], 405)

    def artifact(self, store_id, compression):
        status, payload, headers = self.larder.call("GET", "/stores/%s/artifact?compression=%s" % (store_id, compression), raw=True)
        self.assertEqual(status, 200)
        path = os.path.join(self.root, "a-%s.zip" % compression)
        with open(path, "wb") as f:
            f.write(payload)
        return path

    def test_artifact_read_back_with_zipfile(self):
        _, store, _ = self.larder.call("POST", "/stores", {"template": "gallery", "fixtures": ["artists", "artworks"]})
        db = sqlite3.connect(store["path"])
        db.execute("UPDATE artists SET born = 1 WHERE id = 2")
        db.execute("INSERT INTO partners (name) VALUES (?)", ("Partner & Co",))
        db.commit()
        db.close()
        for compression, method in [("deflate", zipfile.ZIP_DEFLATED), ("store", zipfile.ZIP_STORED)]:
            with zipfile.ZipFile(self.artifact(store["id"], compression)) as z:
                self.assertIsNone(z.testzip())
                self.assertEqual([i.filename for i in z.infolist()], ["store.sqlite", "manifest.json", "diff.json"])
                # diff.json is what GET /diff answers; the manifest counts the changes.
                diff = json.loads(z.read("diff.json"))
                self.assertEqual(diff, self.larder.call("GET", "/stores/%s/diff" % store["id"])[1])
                self.assertEqual(diff["tables"]["artists"]["rows"][0]["new"]["born"], 1)
                self.assertEqual(diff["tables"]["partners"]["rows"][0]["new"]["name"], "Partner & Co")
                self.assertEqual(json.loads(z.read("manifest.json"))["changes"], {
                    "artists": {"inserted": 0, "updated": 1, "deleted": 0}, "partners": {"inserted": 1, "updated": 0, "deleted": 0}})
                self.assertEqual(z.getinfo("store.sqlite").compress_type, method)
                manifest = json.loads(z.read("manifest.json"))
                database = z.read("store.sqlite")
                self.assertEqual(manifest["sha256"], hashlib.sha256(database).hexdigest())
                self.assertEqual(manifest["counts"]["artworks"], 12)
                self.assertEqual(manifest["id"], store["id"])
                copy = os.path.join(self.root, "copy.sqlite")
                with open(copy, "wb") as f:
                    f.write(database)
                self.assertEqual(sqlite3.connect(copy).execute("PRAGMA integrity_check").fetchone()[0], "ok")
            if compression == "store":
                # Stored entries carry CRC and sizes in the local header (no data descriptor).
                with open(self.artifact(store["id"], "store"), "rb") as f:
                    header = f.read(30)
                self.assertEqual(header[:4], b"PK\x03\x04")
                self.assertEqual(int.from_bytes(header[6:8], "little") & 0x08, 0)

    @unittest.skipUnless(shutil.which("javac") and shutil.which("java"), "no JDK on this machine")
    def test_java_zip_input_stream_reads_both_compressions(self):
        store = self.big_store(100)
        classes = os.path.join(self.root, "java")
        os.makedirs(classes)
        subprocess.run(["javac", "-d", classes, os.path.join(os.path.dirname(os.path.abspath(__file__)), "ZipCheck.java")], check=True)
        for compression, method in [("deflate", "8"), ("store", "0")]:
            out = subprocess.run(["java", "-cp", classes, "ZipCheck", self.artifact(store["id"], compression)],
                                 check=True, capture_output=True, text=True).stdout.split("\n")
            name, size, got = out[0].split()
            self.assertEqual((name, got), ("store.sqlite", method))
            self.assertGreater(int(size), 6 * 1000 * 1000)
            self.assertTrue(out[1].startswith("manifest.json "))

    def test_snapshot_while_another_process_commits(self):
        _, store, _ = self.larder.call("POST", "/stores")
        setup = sqlite3.connect(store["path"])
        setup.execute("CREATE TABLE pairs (n INTEGER)")
        setup.commit()
        setup.close()
        writer = commit_loop(store["path"], 4, ["INSERT INTO pairs VALUES (?)", "INSERT INTO pairs VALUES (?)"])
        try:
            self.assertTrue(wait_until(lambda: rows(store["path"], "pairs")), "the writer never committed")
            for _ in range(5):
                with zipfile.ZipFile(self.artifact(store["id"], "store")) as z:
                    copy = os.path.join(self.root, "live.sqlite")
                    with open(copy, "wb") as f:
                        f.write(z.read("store.sqlite"))
                db = sqlite3.connect(copy)
                self.assertEqual(db.execute("PRAGMA integrity_check").fetchone()[0], "ok")
                count = db.execute("SELECT count(*) FROM pairs").fetchone()[0]
                self.assertEqual(count % 2, 0, "a snapshot holds half a commit")
                db.close()
        finally:
            writer.wait(timeout=30)

    def test_diff_while_another_process_commits(self):
        _, store, _ = self.larder.call("POST", "/stores", {"template": "gallery", "fixtures": ["artists"]})
        writer = commit_loop(store["path"], 3, ["INSERT INTO artworks (artist_id, title) VALUES (1, 'a' || ?)",
                                                "UPDATE artists SET born = ? WHERE id = 1",
                                                "INSERT INTO artworks (artist_id, title) VALUES (2, 'b' || ?)"])
        try:
            self.assertTrue(wait_until(lambda: rows(store["path"], "artworks")), "the writer never committed")
            seen = set()
            for _ in range(10):
                status, diff, _ = self.larder.call("GET", "/stores/%s/diff?limit=1" % store["id"])
                self.assertEqual(status, 200, diff)
                inserted = diff["tables"]["artworks"]["inserted"]
                self.assertEqual(inserted % 2, 0, "a diff sees whole commits only")
                self.assertLessEqual(len(diff["tables"]["artworks"]["rows"]), 1, "limit cuts rows")
                born = diff["tables"]["artists"]["rows"][0]["new"]["born"]
                self.assertEqual(born, inserted // 2 - 1, "one state across tables")
                seen.add(inserted)
            self.assertGreater(len(seen), 1, "the writer was writing")
            # The artifact's diff is of exactly the database beside it.
            with zipfile.ZipFile(self.artifact(store["id"], "store")) as z:
                copy = os.path.join(self.root, "diffed.sqlite")
                with open(copy, "wb") as f:
                    f.write(z.read("store.sqlite"))
                artworks = sqlite3.connect(copy).execute("SELECT count(*) FROM artworks").fetchone()[0]
                self.assertEqual(json.loads(z.read("diff.json"))["tables"]["artworks"]["inserted"], artworks)
                self.assertEqual(json.loads(z.read("manifest.json"))["counts"]["artworks"], artworks)
        finally:
            writer.wait(timeout=30)

    def big_store(self, blobs):
        """A store of `blobs` random 64 KiB rows, written by this process."""
        _, store, _ = self.larder.call("POST", "/stores")
        db = sqlite3.connect(store["path"])
        db.execute("CREATE TABLE big (b BLOB)")
        db.executemany("INSERT INTO big VALUES (randomblob(65536))", [()] * blobs)
        db.commit()
        db.close()
        return store

    def test_disconnect_in_the_middle_leaves_nothing_behind(self):
        store = self.big_store(800)  # ~50 MB
        for _ in range(3):
            connection = http.client.HTTPConnection(self.larder.address, timeout=30)
            connection.request("GET", "/stores/%s/artifact?compression=store" % store["id"])
            response = connection.getresponse()
            self.assertEqual(response.status, 200)
            response.read(1 << 20)
            connection.sock.shutdown(socket.SHUT_RDWR)
            connection.close()
        wait_until(lambda: os.listdir(os.path.join(self.root, "tmp")) == [])
        self.assertEqual(os.listdir(os.path.join(self.root, "tmp")), [])
        self.assertEqual(self.larder.call("GET", "/health")[0], 200)
        self.assertLess(open_descriptors(self.larder.pid), 64, "descriptors leak after disconnects")

    def test_store_survives_kill_9_and_restart(self):
        _, store, _ = self.larder.call("POST", "/stores", {"template": "boardgames", "label": "survivor"})
        self.larder.call("PATCH", "/stores/%s" % store["id"], {"keep": True})
        self.larder.stop(signal.SIGKILL)
        os.makedirs(os.path.join(self.root, "building", "st_half_built"))
        self.larder = Larder(self.root)
        status, again, _ = self.larder.call("GET", "/stores/%s" % store["id"])
        self.assertEqual(status, 200)
        self.assertEqual((again["label"], again["keep"], again["version"]), ("survivor", True, "2"))
        self.assertEqual(half_made(self.root), [])

    def test_ready_copies_and_the_trash_across_kill_9(self):
        request = {"template": "gallery", "fixtures": ["artists"]}
        first = self.larder.call("POST", "/stores", request)[1]
        self.assertTrue(wait_until(lambda: self.larder.metric("larder_ready_copies") == 16), "the ready copies are made in the background")
        second = self.larder.call("POST", "/stores", dict(request, label="a ready copy"))[1]
        self.assertEqual(self.larder.metric("larder_ready_copy_handouts_total"), 1)
        self.assertEqual(second["counts"]["artists"], 4)
        with open(first["path"], "rb") as a, open(second["path"], "rb") as b:
            self.assertEqual(a.read(), b.read())
        self.assertEqual([s["id"] for s in self.larder.call("GET", "/stores")[1]["stores"]], [second["id"], first["id"]])
        self.larder.call("PATCH", "/stores/%s" % first["id"], {"keep": True})
        self.assertEqual(self.larder.call("DELETE", "/stores/%s" % second["id"])[0], 204)
        self.larder.stop(signal.SIGKILL)
        # As a crash mid-removal leaves it: a deleted store still in the trash.
        os.makedirs(os.path.join(self.root, "trash", "st_cut_short"))
        open(os.path.join(self.root, "trash", "st_cut_short", "store.sqlite"), "wb").close()
        self.assertGreater(len(self.ready_copies()), 0)

        self.larder = Larder(self.root)
        self.assertEqual([s["id"] for s in self.larder.call("GET", "/stores")[1]["stores"]], [first["id"]])
        self.assertTrue(wait_until(lambda: os.listdir(os.path.join(self.root, "trash")) == []), "the trash is emptied")
        self.assertEqual(self.ready_copies(), [])
        self.assertEqual(sorted(os.listdir(os.path.join(self.root, "stores"))), [first["id"]])
        self.assertEqual(self.larder.metric("larder_ready_copies"), 0)

    def ready_copies(self):
        """Ready copies: directories in stores/ whose record is not in the journal yet."""
        with open(os.path.join(self.root, "stores.journal")) as f:
            ids = {json.loads(line)["id"] for line in f if line.strip()}
        return [n for n in os.listdir(os.path.join(self.root, "stores")) if n not in ids]

    def test_large_deflated_artifact_is_one_valid_stream(self):
        store = self.big_store(150)  # ~10 MB: compressed in parallel chunks
        db = sqlite3.connect(store["path"])
        db.execute("CREATE TABLE words (w TEXT)")
        db.executemany("INSERT INTO words VALUES (?)", [("word %d " % i * 20,) for i in range(20000)])
        db.commit()
        db.close()
        with zipfile.ZipFile(self.artifact(store["id"], "deflate")) as z:
            self.assertIsNone(z.testzip())
            manifest = json.loads(z.read("manifest.json"))
            self.assertEqual(manifest["sha256"], hashlib.sha256(z.read("store.sqlite")).hexdigest())
            self.assertEqual(manifest["counts"]["words"], 20000)

    def test_json_log_has_a_line_per_request_with_its_id(self):
        self.larder.stop()
        shutil.rmtree(self.root, ignore_errors=True)
        self.larder = Larder(self.root, "--log-format", "json")
        self.assertEqual(self.larder.call("GET", "/health", headers={"X-Request-Id": "ci-42"}).headers["X-Request-Id"], "ci-42")
        status, _, headers = self.larder.call("GET", "/stores/st_missing")
        self.assertEqual(status, 404)
        made = headers["X-Request-Id"]

        def whole_lines():
            text = self.larder.log_text()
            return text[:text.rfind("\n") + 1]
        wait_until(lambda: "ci-42" in whole_lines() and made in whole_lines())
        lines = [json.loads(line) for line in self.larder.log_text().splitlines() if line.strip()]
        requests = {line["request_id"]: line for line in lines if line.get("msg") == "request"}
        self.assertEqual(set(requests), {"ci-42", made})
        health = requests["ci-42"]
        self.assertEqual((health["level"], health["method"], health["path"], health["status"]), ("info", "GET", "/health", 200))
        self.assertIsInstance(health["ms"], (int, float))
        self.assertTrue(health["ts"].endswith("Z"))
        self.assertEqual(requests[made]["status"], 404)
        # An error answer's line names the contract's code; a success's has none.
        self.assertEqual(requests[made]["error"], "store_not_found")
        self.assertNotIn("error", health)

    def test_a_fixtures_folder_that_is_not_there_is_refused_at_start(self):
        scratch = scratch_folder(self, "larder-fixtures-")
        a_file = os.path.join(scratch, "a-file")
        open(a_file, "w").close()
        for fixtures, said in [(os.path.join(scratch, "nope"), "does not exist"), (a_file, "is not a folder")]:
            done = subprocess.run([BINARY, "serve", "--port", "0", "--root", os.path.join(scratch, "root"), "--fixtures", fixtures],
                                  capture_output=True, text=True, timeout=30)
            self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
            self.assertIn("the fixtures folder %s %s" % (fixtures, said), done.stderr)
            self.assertIn("--fixtures DIR or LARDER_FIXTURES", done.stderr)
            self.assertEqual(done.stdout, "", "it never said it was listening")
        # An empty folder starts (uploads and builds need no template), and says so.
        empty = os.path.join(scratch, "empty")
        os.mkdir(empty)
        server = Larder(os.path.join(scratch, "root"), fixtures=empty)
        try:
            self.assertEqual(server.call("GET", "/health")[1]["templates"], 0)
            health = subprocess.run([BINARY, "health", "--url", server.base], capture_output=True, text=True, timeout=30)
            self.assertEqual(health.returncode, 0)
            self.assertIn("no templates (its fixtures folder has none)", health.stdout)
            wait_until(lambda: "no templates in the fixtures folder" in server.log_text())
            self.assertIn("no templates in the fixtures folder", server.log_text())
        finally:
            server.stop()
        self.assertEqual(self.larder.call("GET", "/health")[1]["templates"], len(os.listdir(FIXTURES)))

    def test_check_makes_the_junit_reports_folder_and_says_when_it_cannot_write(self):
        scratch = scratch_folder(self, "larder-junit-")
        report = os.path.join(scratch, "test-reports", "larder", "migrations.xml")
        done = subprocess.run([BINARY, "check", "--fixtures", FIXTURES, "--template", "gallery", "--junit", report],
                              capture_output=True, text=True, timeout=300)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        with open(report) as f:
            self.assertIn("<testsuites", f.read())
        blocker = os.path.join(scratch, "a-file")
        open(blocker, "w").close()
        done = subprocess.run([BINARY, "check", "--fixtures", FIXTURES, "--template", "gallery", "--junit", os.path.join(blocker, "m.xml")],
                              capture_output=True, text=True, timeout=300)
        self.assertEqual(done.returncode, 2, "a report it cannot write is not a failed check")
        self.assertIn("larder check: cannot write the JUnit report %s/m.xml: " % blocker, done.stderr)
        self.assertNotIn("NSCocoaErrorDomain", done.stderr)

    def test_one_malformed_template_fails_alone_in_check_and_in_the_checks_route(self):
        """A template that cannot be read is a failed result of its own, in
        `larder check` and GET /checks/migrations alike: the others are still checked."""
        scratch = scratch_folder(self, "larder-broken-")
        fixtures = os.path.join(scratch, "fixtures")
        shutil.copytree(os.path.join(FIXTURES, "boardgames"), os.path.join(fixtures, "boardgames"))
        os.makedirs(os.path.join(fixtures, "broken", "migrations"))
        for name in ("1_a.up.sql", "1_b.up.sql"):  # two migrations of one version
            with open(os.path.join(fixtures, "broken", "migrations", name), "w") as f:
                f.write("CREATE TABLE t (x);\n")
        done = subprocess.run([BINARY, "check", "--fixtures", fixtures], capture_output=True, text=True, timeout=300)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertIn("broken", done.stdout)
        self.assertIn("cannot be read", done.stdout)
        self.assertIn("PASS", done.stdout, "boardgames is checked all the same")
        server = Larder(os.path.join(scratch, "root"), fixtures=fixtures)
        try:
            status, body, _ = server.call("GET", "/checks/migrations")
            self.assertEqual(status, 422, body)
            kinds = {(r["template"], r["kind"], r["passed"]) for r in body["results"]}
            self.assertIn(("broken", "template", False), kinds)
            self.assertIn(("boardgames", "round_trip", True), kinds)
        finally:
            server.stop()

    def test_the_formats_teams_migrate_with_give_their_tools_bookkeeping_over_http(self):
        """A template of each of issue 44's formats, through the real server:
        /templates names the format, a store has the tool's own table with a
        row per migration, and counts leave it out."""
        scratch = scratch_folder(self, "larder-formats-")
        create = "CREATE TABLE users (id INTEGER PRIMARY KEY);\n"
        posts = "CREATE TABLE posts (id INTEGER PRIMARY KEY);\n"
        templates = {
            "sqlx": ({"1_users.sql": create, "2_posts.up.sql": posts, "2_posts.down.sql": "DROP TABLE posts;\n", "../template.json": '{"format": "sqlx"}'},
                     "_sqlx_migrations"),
            "sqlmigrate": ({"1_users.sql": "-- +migrate Up\n" + create, "2_posts.sql": "-- +migrate Up\n" + posts + "-- +migrate Down\nDROP TABLE posts;\n"},
                           "gorp_migrations"),
            "diesel": ({"2024-01-01-000000_users/up.sql": create, "2024-01-02-000000_posts/up.sql": posts, "2024-01-02-000000_posts/down.sql": "DROP TABLE posts;"},
                       "__diesel_schema_migrations"),
            "prisma": ({"migration_lock.toml": 'provider = "sqlite"\n', "20240101000000_users/migration.sql": create, "20240102000000_posts/migration.sql": posts},
                       "_prisma_migrations"),
            "atlas": ({"1_users.sql": create, "2_posts.sql": posts,
                       "atlas.sum": "h1:PLACEHOLDER"}, "atlas_schema_revisions"),
            "drizzle": ({"meta/_journal.json": '{"version":"7","dialect":"sqlite","entries":[{"idx":0,"version":"6","when":1,"tag":"0000_users","breakpoints":true},'
                                               '{"idx":1,"version":"6","when":2,"tag":"0001_posts","breakpoints":true}]}',
                         "0000_users.sql": create, "0001_posts.sql": posts}, "__drizzle_migrations"),
        }
        templates["atlas"][0]["atlas.sum"] = atlas_sum({k: v for k, v in templates["atlas"][0].items() if k.endswith(".sql")})
        for name, (files, _) in templates.items():
            for path, text in files.items():
                full = os.path.normpath(os.path.join(scratch, "fixtures", name, "migrations", path))
                os.makedirs(os.path.dirname(full), exist_ok=True)
                with open(full, "w") as f:
                    f.write(text)
        server = Larder(os.path.join(scratch, "root"), fixtures=os.path.join(scratch, "fixtures"))
        try:
            status, listing, _ = server.call("GET", "/templates")
            self.assertEqual(status, 200, listing)
            formats = {t["name"]: t["format"] for t in listing["templates"]}
            self.assertEqual(formats, {"sqlx": "sqlx", "sqlmigrate": "sql-migrate", "diesel": "diesel", "prisma": "prisma", "drizzle": "drizzle", "atlas": "atlas"})
            for name, (_, table) in templates.items():
                status, store, _ = server.call("POST", "/stores", {"template": name})
                self.assertEqual(status, 201, (name, store))
                db = sqlite3.connect(store["path"])
                self.assertEqual(db.execute('SELECT count(*) FROM "%s"' % table).fetchone()[0], 2, name)
                db.close()
                status, counts, _ = server.call("GET", "/stores/%s/counts" % store["id"])
                self.assertEqual(sorted(counts["counts"]), ["posts", "users"], (name, counts))
                if name == "diesel":
                    status, moved, _ = server.call("POST", "/stores/%s/migrate" % store["id"], {"to": "20240101000000"})
                    self.assertEqual(status, 200, moved)
                    db = sqlite3.connect(store["path"])
                    self.assertEqual(db.execute("SELECT version FROM __diesel_schema_migrations").fetchall(), [("20240101000000",)])
                    db.close()
        finally:
            server.stop()

    def test_a_start_that_fails_says_what_to_do_in_one_line(self):
        port = self.larder.port  # in use by this test's server
        scratch = scratch_folder(self, "larder-start-")
        cases = [
            (["--port", str(port)], {}, 2, "larder: 127.0.0.1:%d is in use (another server on that port): "
                                           "choose another with --port, or --port 0 for a free one" % port),
            (["--prot", "7464"], {}, 64, "larder: unknown setting --prot; did you mean --port?"),
            (["--pool", "3"], {}, 64, "larder: unknown setting --pool; did you mean --ready-copies?"),
            ([], {"LARDER_PORT": "abc"}, 64, "larder: LARDER_PORT must be a whole number in 0...65535, not 'abc'"),
        ]
        for arguments, variables, code, said in cases:
            done = subprocess.run([BINARY, "serve", "--root", os.path.join(scratch, "root"), "--fixtures", FIXTURES, *arguments],
                                  capture_output=True, text=True, timeout=30, env=clean_environment(**variables))
            self.assertEqual(done.returncode, code, arguments)
            self.assertEqual(done.stderr.splitlines(), [said])
            self.assertEqual(done.stdout, "")

    def test_serve_help_leads_with_usage_and_examples_and_groups_every_setting(self):
        text = subprocess.run([BINARY, "serve", "--help"], capture_output=True, text=True, timeout=30, check=True).stdout
        lines = text.splitlines()
        self.assertEqual(lines[2], "USAGE: larder serve [--<setting> <value> ...]")
        self.assertEqual(lines[4], "EXAMPLES:")
        self.assertLess(lines.index("NETWORK:"), lines.index("STORAGE:"))
        for heading in ["STORES:", "TIME AND SIZE LIMITS:", "LOGGING:"]:
            self.assertIn(heading, lines)
        flags = re.findall(r"^  (--[a-z-]+) ", text, re.M)
        self.assertEqual(len(flags), len(set(flags)), "each setting once")
        self.assertIn("--missing-fixtures", flags)
        self.assertIn("--kept-ttl-seconds", flags)
        with open(os.path.join(REPO, "docs", "settings.md")) as f:
            self.assertEqual(sorted(flags), sorted(re.findall(r"^\| `(--[a-z-]+)` \| `LARDER_", f.read(), re.M)), "docs/settings.md's tables too")
        self.assertEqual([l for l in lines if len(l) > 80], [])
        self.assertEqual(subprocess.run([BINARY, "serve", "-h"], capture_output=True, text=True, timeout=30).stdout, text)

    def test_completions_and_the_manual_know_every_command_option_and_setting(self):
        def run(*arguments, **options):
            return subprocess.run(arguments, capture_output=True, text=True, timeout=60, **options)
        scratch = scratch_folder(self, "larder-completions-")
        scripts = {}
        for shell in ["bash", "zsh", "fish"]:
            done = run(BINARY, "completions", shell)
            self.assertEqual(done.returncode, 0, done.stderr)
            scripts[shell] = os.path.join(scratch, "larder." + shell)
            with open(scripts[shell], "w") as f:
                f.write(done.stdout)
        self.assertEqual(run(BINARY, "completions", "tcsh").returncode, 64)
        # bash: what a Tab offers.
        probe = 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _larder; echo "${COMPREPLY[*]}"'
        def bash(*words):
            return run("bash", "-c", probe, "probe", scripts["bash"], *words).stdout.split()
        self.assertEqual(bash("larder", "se"), ["serve"])
        self.assertEqual(sorted(bash("larder", "serve", "--re")), ["--read-timeout-ms", "--ready-copies", "--reap-interval-seconds"])
        self.assertEqual(bash("larder", "--kept"), ["--kept-ttl-seconds"], "no command: serve's settings")
        self.assertEqual(bash("larder", "serve", "--log-level", "war"), ["warning"])
        self.assertEqual(bash("larder", "warm", "--missing-fix"), ["--missing-fixtures"])
        self.assertEqual(bash("larder", "completions", "fi"), ["fish"])
        # zsh and fish: valid scripts; fish offers the same.
        self.assertEqual(run("zsh", "-n", scripts["zsh"]).returncode, 0)
        self.assertEqual(run("fish", "--no-execute", scripts["fish"]).returncode, 0)
        offered = run("fish", "-c", "source %s; complete -C 'larder serve --re'" % scripts["fish"]).stdout
        self.assertEqual(sorted(line.split("\t")[0] for line in offered.splitlines()), ["--read-timeout-ms", "--ready-copies", "--reap-interval-seconds"])
        # Each command's own options, as its --help lists them, are what the completions offer besides the settings.
        settings = set(bash("larder", "serve", "--")) - {"--help"}
        for command in ["check", "health", "warm", "up"]:
            listed = set(re.findall(r"^\s+(--[a-z-]+)", run(BINARY, command, "--help").stdout, re.M)) - {"--help", "--version"}
            takes_settings = command in ("warm", "up")
            self.assertEqual(set(bash("larder", command, "--")) - {"--help"}, listed | (settings if takes_settings else set()), command)
        # The manual: every setting, and groff finds nothing to warn about.
        page = run(BINARY, "manual").stdout
        self.assertTrue(page.startswith(".TH LARDER 1 "))
        for flag in settings:
            self.assertIn(flag.replace("-", "\\-"), page)
        rendered = run("groff", "-man", "-ww", "-z", input=page)
        self.assertEqual((rendered.returncode, rendered.stderr), (0, ""))

    def test_sigterm_exits_cleanly(self):
        self.assertEqual(self.larder.stop(signal.SIGTERM), 0)

    def test_large_store_download(self):
        store = self.big_store(3200)  # ~210 MB
        path = os.path.join(self.root, "big.zip")
        with open(path, "wb") as f:
            status, _ = download(self.larder.base, "/stores/%s/artifact?compression=store" % store["id"], f.write, timeout=300)
        self.assertEqual(status, 200)
        with zipfile.ZipFile(path) as z:
            info = z.getinfo("store.sqlite")
            self.assertGreater(info.file_size, 200 * 1000 * 1000)
            self.assertIsNone(z.testzip())


if __name__ == "__main__":
    run_tests("client")
