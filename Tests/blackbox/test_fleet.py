#!/usr/bin/env python3
"""The fleet cache (issue 46): template databases and app builds shared by
a CI fleet through an S3 bucket, the cache folder shared by the servers of
one machine, failed tests' artifacts uploaded, and `larder open`.

    python3 Tests/blackbox/test_fleet.py .build/debug/larder

Several real servers, each on a root of its own, share one bucket of a real
S3 API on loopback: moto with request signing on (Tests/support/s3server.py;
moto lives in a virtual environment it makes once, from PyPI). Each test
has its own prefix in the bucket. Faults are real too: a port nobody
listens on, a socket that accepts and never answers, a wrong secret, and
objects overwritten in the bucket.
"""
import gzip
import hashlib
import html
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
import urllib.request
import zipfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from processes import (FIXTURES, Server, clean_environment, first_line, free_port, larder_binary,  # noqa: E402
                       readable_log, run_tests, scratch_folder, wait_until)
from calls import call, metric  # noqa: E402
from s3server import S3Server  # noqa: E402

BINARY = larder_binary()
BUCKET, BARE, ARTIFACTS = "fleet", "fleet-bare", "fleet-artifacts"
# Every counter the spec names.
COUNTERS = ["larder_fleet_cache_hits_total", "larder_fleet_cache_misses_total", "larder_fleet_cache_errors_total",
            "larder_fleet_cache_refused_total", "larder_fleet_cache_skipped_total", "larder_fleet_cache_published_total",
            "larder_fleet_cache_downloaded_bytes_total", "larder_fleet_cache_uploaded_bytes_total",
            "larder_artifact_uploads_total", "larder_artifact_upload_errors_total", "larder_template_builds_total"]
GALLERY = {"template": "gallery", "fixtures": ["artists", "artworks"]}
# Generous: a time limit of 1 s, on a machine that may be busy.
FAULT_DEADLINE = 25
S3 = None


def setUpModule():
    global S3
    S3 = S3Server(buckets=[BUCKET, BARE, ARTIFACTS])


def tearDownModule():
    if S3:
        S3.stop()


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def sqlite_bytes(data, scratch):
    """Opens `data` as a database (a file in `scratch`): its tables' row counts; fails when it is not a sound database."""
    path = os.path.join(scratch, "check-%s.sqlite" % sha256(data)[:16])
    with open(path, "wb") as f:
        f.write(data)
    db = sqlite3.connect(path)
    try:
        problems = db.execute("PRAGMA integrity_check").fetchall()
        if problems != [("ok",)]:
            raise AssertionError("not a sound database: %s" % problems[:3])
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        return {t: db.execute('SELECT count(*) FROM "%s"' % t).fetchone()[0] for t in tables}
    finally:
        db.close()
        os.unlink(path)


def log_lines(server):
    """The server's log as dicts (JSON lines; a text line becomes {"msg": line})."""
    lines = []
    for line in server.log_text().splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            lines.append({"msg": line})
    return lines


def warnings_with(server, *words):
    """The log lines at warning level (or above) whose message holds every one of `words`."""
    return [line for line in log_lines(server)
            if line.get("level", "warning") in ("warning", "error", "critical") and all(w in json.dumps(line) for w in words)]


class HungEndpoint:
    """A loopback socket that accepts connections and never answers."""

    def __init__(self):
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.accepted, self.done = [], False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.done:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.accepted.append(connection)

    def close(self):
        self.done = True
        self.listener.close()
        for connection in self.accepted:
            connection.close()


class FleetTest(unittest.TestCase):
    def setUp(self):
        self.scratch = scratch_folder(self, "larder-fleet-")
        self.servers = []
        # Each test's own part of the bucket.
        self.prefix = "runs/%s-%s" % (self._testMethodName, os.urandom(4).hex())

    def tearDown(self):
        for server in self.servers:
            if server.alive():
                server.stop()

    @property
    def url(self):
        return "s3://%s/%s" % (BUCKET, self.prefix)

    def serve(self, *extra, env=None, cache_url=True, fixtures=FIXTURES):
        """A server on a new root, with this test's --cache-url unless told otherwise, its credentials S3's user's."""
        root = self.new_root()
        arguments = (["--cache-url", self.url if cache_url is True else cache_url] if cache_url else []) + list(extra)
        server = Server(BINARY, root, fixtures, *arguments, env=env or S3.larder_env())
        server.root = root
        self.servers.append(server)
        return server

    def new_root(self):
        """A path in the scratch folder that does not exist yet (the server makes its root)."""
        self.roots = getattr(self, "roots", 0) + 1
        return os.path.join(self.scratch, "root-%d" % self.roots)

    def store(self, server, body=None, deadline=None):
        began = time.monotonic()
        status, store, _ = server.call("POST", "/stores", body or GALLERY, timeout=deadline or 120)
        self.assertEqual(status, 201, store)
        store["seconds"] = time.monotonic() - began
        return store

    def assertNoListing(self, requests):
        """No request of `requests` (S3Server.requests()) lists a bucket: each names an object, without a query."""
        for method, path, status in requests:
            self.assertIn(method, ("GET", "HEAD", "PUT"), path)
            self.assertEqual(path.count("/") >= 2 and "?" not in path and not path.endswith("/"), True, "not by name: %s %s" % (method, path))

    def stop_keeping_log(self, server, timeout=30):
        """SIGTERM, the exit waited for; (exit status, the whole log) (Server.stop removes the log)."""
        server.process.send_signal(signal.SIGTERM)
        try:
            server.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        log = server.log_text()
        return server.stop(), log

    def metrics(self, server):
        return {name: server.metric(name) for name in COUNTERS}

    def entries(self, folder):
        """{key: bytes} of the template entries in a cache folder."""
        found = {}
        for name in sorted(os.listdir(folder)):
            if name.endswith(".sqlite"):
                with open(os.path.join(folder, name), "rb") as f:
                    found[name[:-len(".sqlite")]] = f.read()
        return found

    def manifests(self, bucket=BUCKET, prefix=None):
        """{key: manifest} of every manifest under the prefix."""
        prefix = self.prefix if prefix is None else prefix
        start = (prefix + "/" if prefix else "") + "manifests/"
        found = {}
        for name in S3.list(bucket, start):
            self.assertTrue(name.endswith(".json"), name)
            found[name[len(start):-len(".json")]] = json.loads(S3.get(bucket, name))
        return found

    def object_of(self, manifest, bucket=BUCKET, prefix=None):
        """The database a manifest names, uncompressed; None when the object is missing or not gzip."""
        prefix = self.prefix if prefix is None else prefix
        data = S3.get(bucket, (prefix + "/" if prefix else "") + manifest["object"])
        try:
            return None if data is None else gzip.decompress(data)
        except (OSError, EOFError):
            return None

    def sound(self, manifest, bucket=BUCKET, prefix=None):
        """Whether a manifest names an object that is what it says: a gzip of a database whose SHA-256 and size it gives."""
        plain = self.object_of(manifest, bucket, prefix)
        return (plain is not None and sha256(plain) == manifest["sha256"] and len(plain) == manifest["size"]
                and manifest["object"] == "objects/%s.sqlite.gz" % manifest["sha256"] and plain.startswith(b"SQLite format 3\0"))

    def published(self, server, count=1, seconds=60):
        """Waits until `server` has published `count` entries (its counter)."""
        self.assertTrue(wait_until(lambda: (server.metric("larder_fleet_cache_published_total") or 0) >= count, seconds),
                        "published %s of %d; log:\n%s" % (server.metric("larder_fleet_cache_published_total"), count, server.log_text()[-3000:]))

    def dump(self, server, store):
        status, data, _ = server.call("GET", "/stores/%s/database" % store["id"], raw=True)
        self.assertEqual(status, 200)
        path = os.path.join(self.scratch, "dump-%s.sqlite" % store["id"])
        with open(path, "wb") as f:
            f.write(data)
        db = sqlite3.connect(path)
        try:
            return list(db.iterdump())
        finally:
            db.close()

    def origin(self, server, store):
        """Where the store's template entry came from ("built", "machine" or
        "fleet"), as the server says it: no JSON answer names a template
        entry's origin, the dashboard's "Template cache" table does (its
        "from" column, on the row of the store's template, version and fixtures)."""
        if "origin" in store:
            return store["origin"]
        status, page, _ = server.call("GET", "/", raw=True)
        self.assertEqual(status, 200)
        table = re.search(r'<table class="cache">(.*?)</table>', page.decode("utf-8", "replace"), re.S)
        self.assertIsNotNone(table, "the dashboard has no template cache table")
        rows = []
        for row in re.findall(r"<tr>(.*?)</tr>", table.group(1), re.S):
            cells = [html.unescape(re.sub(r"<[^>]+>", "", cell)).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            if cells:
                rows.append(cells)
        wanted = [store["template"], store["version"] or "", ", ".join(store["fixtures"])]
        found = [cells[5] for cells in rows if cells[:3] == wanted]
        self.assertEqual(len(found), 1, (wanted, rows))
        return {"built here": "built", "this machine's cache": "machine", "the fleet": "fleet"}.get(found[0], found[0])

    def check_manifest(self, key, manifest, health, bucket=BUCKET, prefix=None):
        self.assertEqual(manifest["format"], 1)
        self.assertEqual(manifest["key"], key)
        self.assertRegex(manifest["sha256"], r"^[0-9a-f]{64}$")
        self.assertEqual(manifest["object"], "objects/%s.sqlite.gz" % manifest["sha256"])
        prefix = self.prefix if prefix is None else prefix
        compressed = S3.get(bucket, (prefix + "/" if prefix else "") + manifest["object"])
        self.assertIsNotNone(compressed, "the manifest's object is missing")
        self.assertEqual(manifest["compressed_size"], len(compressed))
        self.assertEqual(compressed[:2], b"\x1f\x8b", "the object is not gzip")
        plain = gzip.decompress(compressed)
        self.assertEqual(sha256(plain), manifest["sha256"])
        self.assertEqual(manifest["size"], len(plain))
        self.assertEqual(sqlite_bytes(plain, self.scratch), dict(sqlite_bytes(plain, self.scratch), **manifest["counts"]))
        self.assertEqual(manifest["larder"], health["version"])
        self.assertEqual(manifest["sqlite"], health["sqlite_version"])
        self.assertLess(abs(manifest["published_at"] - time.time()), 3600)
        return plain


class TemplatesAcrossTheFleet(FleetTest):
    def test_the_first_server_builds_and_publishes_the_others_download(self):
        first = self.serve()
        mark = len(S3.requests())
        made = self.store(first)
        built = first.metric("larder_template_builds_total")
        self.assertGreaterEqual(built, 1)
        self.published(first, built)
        # Asked by name, never by listing; each object went up before its manifest.
        requests = S3.requests()[mark:]
        self.assertNoListing(requests)
        puts = [path for method, path, status in requests if method == "PUT" and status == 200]
        for key in self.manifests():
            manifest_put = puts.index("/%s/%s/manifests/%s.json" % (BUCKET, self.prefix, key))
            object_put = puts.index("/%s/%s/%s" % (BUCKET, self.prefix, self.manifests()[key]["object"]))
            self.assertLess(object_put, manifest_put, puts)
        first_entries = self.entries(os.path.join(first.root, "cache"))
        self.assertEqual(len(first_entries), built, sorted(first_entries))
        health = first.call("GET", "/health")[1]

        # The bucket: one manifest per entry, named by its key, and their objects, nothing else.
        manifests = self.manifests()
        self.assertEqual(set(manifests), set(first_entries))
        objects = {"%s/%s" % (self.prefix, m["object"]) for m in manifests.values()}
        self.assertEqual(set(S3.list(BUCKET, self.prefix + "/")), objects | {"%s/manifests/%s.json" % (self.prefix, k) for k in manifests})
        for key, manifest in manifests.items():
            self.assertRegex(key, r"^[0-9a-f]{64}$")
            plain = self.check_manifest(key, manifest, health)
            self.assertEqual(plain, first_entries[key], "the object is not the entry's database")
            self.assertNotIn(first.root.encode(), plain)
        # The store's own entry: its counts and version are the store's.
        [own] = [m for m in manifests.values() if m["counts"] == made["counts"]] or [None]
        self.assertIsNotNone(own, (made["counts"], [m["counts"] for m in manifests.values()]))
        self.assertEqual(own["version"], made["version"])
        self.assertNotIn("build", own)
        metrics = self.metrics(first)
        self.assertGreaterEqual(metrics["larder_fleet_cache_misses_total"], 1)
        self.assertEqual(metrics["larder_fleet_cache_hits_total"], 0)
        self.assertEqual(metrics["larder_fleet_cache_uploaded_bytes_total"], sum(m["compressed_size"] for m in manifests.values()))
        self.assertEqual(self.origin(first, made), "built")

        before = S3.snapshot(BUCKET, self.prefix + "/")
        # The second server's fixtures are a copy elsewhere: the key names what is in them, not where they are.
        elsewhere = os.path.join(self.scratch, "elsewhere", "fixtures")
        shutil.copytree(FIXTURES, elsewhere)
        for fixtures in (FIXTURES, elsewhere):
            other = self.serve(fixtures=fixtures)
            mark = len(S3.requests())
            store = self.store(other)
            requests = S3.requests()[mark:]
            self.assertNoListing(requests)
            self.assertEqual([(m, p) for m, p, _ in requests], [("GET", "/%s/%s/manifests/%s.json" % (BUCKET, self.prefix, own["key"])),
                                                                ("GET", "/%s/%s/%s" % (BUCKET, self.prefix, own["object"]))])
            for field in ("counts", "version", "template", "fixtures"):
                self.assertEqual(store[field], made[field], field)
            self.assertEqual(self.origin(other, store), "fleet")
            metrics = self.metrics(other)
            self.assertEqual(metrics["larder_template_builds_total"], 0, other.log_text()[-2000:])
            self.assertGreaterEqual(metrics["larder_fleet_cache_hits_total"], 1)
            self.assertEqual(metrics["larder_fleet_cache_errors_total"], 0)
            self.assertEqual(metrics["larder_fleet_cache_refused_total"], 0)
            self.assertEqual(metrics["larder_fleet_cache_downloaded_bytes_total"], own["compressed_size"])
            # Byte for byte the first server's entries.
            entries = self.entries(os.path.join(other.root, "cache"))
            for key, data in entries.items():
                self.assertEqual(data, first_entries.get(key), "entry %s differs from the first server's" % key)
            self.assertIn(own["key"], entries)
            # The store itself: the same database (as SQLite sees it).
            self.assertEqual(self.dump(other, store), self.dump(first, made))
            # What was downloaded is not published again (a stop waits for any publishing).
            self.assertEqual(other.metric("larder_fleet_cache_published_total"), 0)
            self.assertEqual(other.stop(), 0)
            self.assertEqual(S3.snapshot(BUCKET, self.prefix + "/"), before)

    def test_stop_waits_for_the_publishing_under_way(self):
        server = self.serve()
        self.store(server)
        # Straight after the answer: the publishing is in the background, and SIGTERM waits for it.
        code, log = self.stop_keeping_log(server)
        manifests = self.manifests()
        self.assertEqual(code, 0, log)
        self.assertGreaterEqual(len(manifests), 1, "nothing published before the server ended; log:\n" + log[-3000:])
        for manifest in manifests.values():
            self.assertTrue(self.sound(manifest))

    def test_a_session_token_is_sent_and_needed(self):
        session = self.serve(env=S3.session_env())
        self.store(session)
        self.published(session, session.metric("larder_template_builds_total"))
        self.assertEqual(session.metric("larder_fleet_cache_errors_total"), 0)
        # The session's key without its token: refused by the bucket, built here all the same.
        tokenless = dict(S3.session)
        del tokenless["session_token"]
        without = self.serve(env=S3.larder_env(**tokenless))
        self.store(without)
        self.assertGreaterEqual(without.metric("larder_template_builds_total"), 1)
        self.assertGreaterEqual(without.metric("larder_fleet_cache_errors_total"), 1)
        self.assertTrue(warnings_with(without, "fleet cache"))


class Warm(FleetTest):
    def test_larder_warm_publishes_what_it_builds_and_downloads_what_is_there(self):
        def warm():
            root = self.new_root()
            done = subprocess.run([BINARY, "warm", "--root", root, "--fixtures", FIXTURES, "--cache-url", self.url, "--template", "gallery"],
                                  env=S3.larder_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            return root
        first = warm()
        # Published before it exited: every entry it made is in the bucket.
        made = self.entries(os.path.join(first, "cache"))
        self.assertGreaterEqual(len(made), 1)
        manifests = self.manifests()
        self.assertEqual(set(manifests), set(made))
        for manifest in manifests.values():
            self.assertTrue(self.sound(manifest))
        before = S3.snapshot(BUCKET, self.prefix + "/")
        # Another machine's warm: the same entries, downloaded, nothing published.
        second = warm()
        self.assertEqual(self.entries(os.path.join(second, "cache")), made)
        self.assertEqual(S3.snapshot(BUCKET, self.prefix + "/"), before)
        # And a server: the template at latest with its default fixtures, downloaded.
        server = self.serve()
        self.store(server, {"template": "gallery"})
        self.assertEqual(server.metric("larder_template_builds_total"), 0)
        self.assertGreaterEqual(server.metric("larder_fleet_cache_hits_total"), 1)


class AppBuildsAcrossTheFleet(FleetTest):
    def test_a_build_finished_on_one_server_is_ready_on_another(self):
        # A bucket's top as the prefix (s3://BUCKET).
        url = "s3://" + BARE
        first = self.serve(cache_url=url)
        status, build, _ = first.call("POST", "/builds", {"key": "django-3f2a9c", "label": "fleet"})
        self.assertEqual(status, 201, build)
        db = sqlite3.connect(build["path"])
        db.execute("CREATE TABLE alembic_version (version_num TEXT NOT NULL PRIMARY KEY)")
        db.execute("INSERT INTO alembic_version VALUES ('ae1027a6acf')")
        db.execute("CREATE TABLE polls_question (id INTEGER PRIMARY KEY, text TEXT)")
        db.executemany("INSERT INTO polls_question (text) VALUES (?)", [("q%d" % i,) for i in range(7)])
        db.commit()
        db.close()
        status, ready, _ = first.call("POST", "/builds/django-3f2a9c/finish", {})
        self.assertEqual(status, 200, ready)
        self.assertEqual((ready["state"], ready.get("origin")), ("ready", "built"))
        self.published(first)
        manifests = self.manifests(BARE, "")
        self.assertIn("build-django-3f2a9c", manifests)
        manifest = manifests["build-django-3f2a9c"]
        self.check_manifest("build-django-3f2a9c", manifest, first.call("GET", "/health")[1], BARE, "")
        self.assertIsInstance(manifest["build"], dict)
        self.assertEqual(manifest["counts"]["polls_question"], 7)
        self.assertEqual(manifest["version"], ready["version"])

        second = self.serve(cache_url=url)
        status, there, _ = second.call("POST", "/builds", {"key": "django-3f2a9c"})
        self.assertEqual(status, 200, there)
        self.assertEqual((there["state"], there.get("origin")), ("ready", "fleet"))
        self.assertNotIn("path", there)
        for field in ("counts", "version", "size_bytes"):
            self.assertEqual(there[field], ready[field], field)
        status, one, _ = second.call("GET", "/builds/django-3f2a9c")
        self.assertEqual((status, one["origin"]), (200, "fleet"))
        listed = second.call("GET", "/builds")[1]["builds"]
        self.assertEqual([(b["key"], b.get("origin")) for b in listed], [("django-3f2a9c", "fleet")])
        store = self.store(second, {"build": "django-3f2a9c"})
        self.assertEqual(store["counts"]["polls_question"], 7)
        self.assertGreaterEqual(second.metric("larder_fleet_cache_hits_total"), 1)
        self.assertEqual(second.metric("larder_fleet_cache_published_total"), 0)
        # A key the bucket lacks: this caller builds it, as before.
        status, fresh, _ = second.call("POST", "/builds", {"key": "django-new"})
        self.assertEqual((status, fresh["state"]), (201, "building"))
        self.assertGreaterEqual(second.metric("larder_fleet_cache_misses_total"), 1)


class Refusals(FleetTest):
    """What comes down is checked; what fails is refused, built here and published again."""

    def setUp(self):
        super().setUp()
        builder = self.serve()
        self.counts = self.store(builder, {"template": "gallery"})["counts"]
        self.published(builder, builder.metric("larder_template_builds_total"))
        builder.stop()
        self.good = self.manifests()
        self.assertGreaterEqual(len(self.good), 1)

    def corrupt(self, replace):
        """Puts what `replace(key, manifest, plain)` answers, {name: bytes}, into the bucket for every manifest."""
        for key, manifest in self.manifests().items():
            plain = self.object_of(manifest)
            for name, data in replace(key, manifest, plain).items():
                S3.put(BUCKET, self.prefix + "/" + name, data)

    def refused_then_mended(self, what):
        server = self.serve()
        store = self.store(server, {"template": "gallery"})
        self.assertEqual(store["counts"], self.counts, what)
        metrics = self.metrics(server)
        self.assertGreaterEqual(metrics["larder_fleet_cache_refused_total"], 1, what)
        self.assertEqual(metrics["larder_fleet_cache_hits_total"], 0, what)
        self.assertGreaterEqual(metrics["larder_template_builds_total"], 1, what)
        self.assertTrue(warnings_with(server, "refused"), "%s: no warning saying 'refused'; log:\n%s" % (what, server.log_text()[-3000:]))
        self.assertTrue(any(key in json.dumps(line) for line in warnings_with(server, "refused") for key in self.good),
                        "%s: the warning does not name the key" % what)
        # Published again: every manifest names a sound object.
        self.assertTrue(wait_until(lambda: all(self.sound(m) for m in self.manifests().values()), 60),
                        "%s: not mended; log:\n%s" % (what, server.log_text()[-3000:]))
        self.assertEqual(set(self.manifests()), set(self.good))
        server.stop()

    def test_garbage_in_place_of_the_object(self):
        self.corrupt(lambda key, manifest, plain: {manifest["object"]: os.urandom(4096)})
        self.refused_then_mended("garbage object")

    def test_a_gzip_of_something_else_under_a_manifest_that_matches_it(self):
        def replace(key, manifest, plain):
            text = b"not a database, " * 4096
            other = dict(manifest, sha256=sha256(text), size=len(text), object="objects/%s.sqlite.gz" % sha256(text))
            return {other["object"]: gzip.compress(text), "manifests/%s.json" % key: json.dumps(other).encode()}
        self.corrupt(replace)
        self.refused_then_mended("gzip of a text file")

    def test_a_manifest_that_misstates_the_size(self):
        self.corrupt(lambda key, manifest, plain: {"manifests/%s.json" % key: json.dumps(dict(manifest, size=manifest["size"] + 4096)).encode()})
        self.refused_then_mended("size changed")

    def test_an_object_gone_from_the_bucket(self):
        # (A lifecycle rule, say.) Not a refusal: built here and published again all the same.
        for manifest in self.good.values():
            S3.delete(BUCKET, "%s/%s" % (self.prefix, manifest["object"]))
        server = self.serve()
        self.assertEqual(self.store(server, {"template": "gallery"})["counts"], self.counts)
        self.assertGreaterEqual(server.metric("larder_template_builds_total"), 1)
        self.assertTrue(wait_until(lambda: all(self.sound(m) for m in self.manifests().values()), 60), server.log_text()[-3000:])

    def test_the_object_under_another_sha256(self):
        def replace(key, manifest, plain):
            fake = sha256(b"another database")
            other = dict(manifest, sha256=fake, object="objects/%s.sqlite.gz" % fake)
            return {other["object"]: gzip.compress(plain), "manifests/%s.json" % key: json.dumps(other).encode()}
        self.corrupt(replace)
        self.refused_then_mended("sha256 changed")

    def test_a_database_that_fails_integrity_check(self):
        def replace(key, manifest, plain):
            path = os.path.join(self.scratch, "corrupt-%s.sqlite" % key)
            db = sqlite3.connect(path)
            db.execute("CREATE TABLE t (a INTEGER PRIMARY KEY, b TEXT, c TEXT)")
            db.execute("CREATE INDEX ib ON t (b)")
            db.executemany("INSERT INTO t (b, c) VALUES (?, ?)", [("v%d" % i, "z%d" % (999 - i)) for i in range(200)])
            db.commit()
            # The index's definition changed under its entries: integrity_check reports rows missing from it.
            db.execute("PRAGMA writable_schema=ON")
            db.execute("UPDATE sqlite_schema SET sql = 'CREATE INDEX ib ON t (c)' WHERE name = 'ib'")
            db.commit()
            db.close()
            with open(path, "rb") as f:
                data = f.read()
            check = sqlite3.connect(path)
            self.assertNotEqual(check.execute("PRAGMA integrity_check").fetchone()[0], "ok")
            check.close()
            other = dict(manifest, sha256=sha256(data), size=len(data), object="objects/%s.sqlite.gz" % sha256(data))
            return {other["object"]: gzip.compress(data), "manifests/%s.json" % key: json.dumps(other).encode()}
        self.corrupt(replace)
        self.refused_then_mended("integrity_check fails")


class Faults(FleetTest):
    """A bucket that cannot be reached costs one time limit, never a request."""

    def fault(self, endpoint, what):
        server = self.serve("--cache-timeout-ms", "1000", "--artifacts-url", "s3://%s/%s" % (ARTIFACTS, self.prefix),
                            env=S3.larder_env(endpoint=endpoint))
        store = self.store(server, deadline=FAULT_DEADLINE * 4)
        self.assertLess(store["seconds"], FAULT_DEADLINE, what)
        self.assertTrue(wait_until(lambda: (server.metric("larder_fleet_cache_errors_total") or 0) > 0, 10), what)
        self.assertTrue(warnings_with(server, "fleet cache"), "%s: no warning; log:\n%s" % (what, server.log_text()[-3000:]))
        self.assertGreaterEqual(server.metric("larder_template_builds_total"), 1)
        # Another key straight after: the bucket is left alone, so no second time limit.
        other = self.store(server, {"template": "gallery", "fixtures": ["partners"]}, deadline=FAULT_DEADLINE * 4)
        self.assertLess(other["seconds"], FAULT_DEADLINE, what)
        self.assertGreaterEqual(server.metric("larder_fleet_cache_skipped_total"), 1, what)
        # A kept store's artifact cannot go up either; the PATCH answers all the same.
        began = time.monotonic()
        status, kept, _ = server.call("PATCH", "/stores/%s" % store["id"], {"keep": True}, timeout=FAULT_DEADLINE * 4)
        self.assertEqual((status, kept["keep"]), (200, True))
        self.assertLess(time.monotonic() - began, FAULT_DEADLINE, what)
        self.assertEqual(server.call("GET", "/health")[1]["status"], "ok")
        # ... and is counted as an upload error, in the background, within about the time limit.
        self.assertTrue(wait_until(lambda: server.metric("larder_artifact_upload_errors_total") == 1, FAULT_DEADLINE),
                        "%s: %s" % (what, self.metrics(server)))
        self.assertEqual(server.metric("larder_artifact_uploads_total"), 0)
        # SIGTERM: whatever publishing was left ends within its time limit.
        began = time.monotonic()
        self.assertEqual(server.stop(timeout=FAULT_DEADLINE * 2), 0, what)
        self.assertLess(time.monotonic() - began, FAULT_DEADLINE, what)

    def test_a_dead_endpoint(self):
        self.fault("http://127.0.0.1:%d" % free_port(), "dead endpoint")

    def test_a_hung_endpoint(self):
        hung = HungEndpoint()
        self.addCleanup(hung.close)
        self.fault("http://127.0.0.1:%d" % hung.port, "hung endpoint")
        self.assertGreaterEqual(len(hung.accepted), 1, "the server never reached the hung endpoint")

    def test_no_credentials(self):
        # Unsigned requests (a public bucket): this bucket refuses them (moto answers 500); nothing is published.
        before = S3.snapshot(BUCKET, self.prefix + "/")
        env = S3.larder_env()
        del env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]
        server = self.serve(env=env)
        self.store(server)
        self.assertGreaterEqual(server.metric("larder_template_builds_total"), 1)
        self.assertGreaterEqual(server.metric("larder_fleet_cache_errors_total"), 1)
        self.assertTrue(warnings_with(server, "fleet cache"), server.log_text()[-3000:])
        self.assertEqual(server.stop(), 0)
        self.assertEqual(S3.snapshot(BUCKET, self.prefix + "/"), before)

    def test_wrong_credentials(self):
        before = S3.snapshot(BUCKET, self.prefix + "/")
        server = self.serve(env=S3.larder_env(secret_access_key="wrong" + S3.secret_access_key[5:]))
        self.store(server)
        self.assertGreaterEqual(server.metric("larder_template_builds_total"), 1)
        self.assertTrue(wait_until(lambda: (server.metric("larder_fleet_cache_errors_total") or 0) >= 1, 10))
        self.assertTrue(warnings_with(server, "fleet cache"), server.log_text()[-3000:])
        self.assertEqual(server.metric("larder_fleet_cache_hits_total"), 0)
        self.assertEqual(server.stop(), 0)
        self.assertEqual(S3.snapshot(BUCKET, self.prefix + "/"), before)


class ReadOnly(FleetTest):
    def test_a_read_only_server_downloads_and_publishes_nothing(self):
        writer = self.serve()
        self.store(writer, {"template": "gallery"})
        self.published(writer, writer.metric("larder_template_builds_total"))
        writer.stop()
        before = S3.snapshot(BUCKET, self.prefix + "/")

        reader = self.serve("--cache-read-only")
        self.assertEqual(reader.call("GET", "/health")[1]["cache"]["read_only"], True)
        self.assertEqual(self.origin(reader, self.store(reader, {"template": "gallery"})), "fleet")
        self.assertGreaterEqual(reader.metric("larder_fleet_cache_hits_total"), 1)
        # A key the bucket lacks: built here, not published.
        self.store(reader, GALLERY)
        self.assertGreaterEqual(reader.metric("larder_template_builds_total"), 1)
        self.assertEqual(reader.metric("larder_fleet_cache_published_total"), 0)
        self.assertEqual(reader.metric("larder_fleet_cache_uploaded_bytes_total"), 0)
        self.assertEqual(reader.stop(), 0)  # (a stop waits for publishing under way: there is none)
        self.assertEqual(S3.snapshot(BUCKET, self.prefix + "/"), before)

        # The setting's other spellings.
        by_variable = self.serve(env=S3.larder_env(LARDER_CACHE_READ_ONLY="true"))
        self.assertEqual(by_variable.call("GET", "/health")[1]["cache"]["read_only"], True)
        undone = self.serve("--cache-read-only=false", env=S3.larder_env(LARDER_CACHE_READ_ONLY="true"))
        self.assertEqual(undone.call("GET", "/health")[1]["cache"]["read_only"], False)


class HealthAndMetrics(FleetTest):
    def test_health_names_the_urls_never_the_credentials(self):
        artifacts = "s3://%s/%s/artifacts" % (ARTIFACTS, self.prefix)
        server = self.serve("--artifacts-url", artifacts)
        self.store(server)
        status, health, _ = server.call("GET", "/health")
        self.assertEqual(status, 200)
        self.assertEqual(health["cache"], {"url": self.url, "read_only": False, "artifacts_url": artifacts})
        _, metrics, _ = server.call("GET", "/metrics", raw=True)
        text = metrics.decode()
        for name in COUNTERS:
            self.assertRegex(text, r"(?m)^# TYPE %s counter$" % name)
            self.assertRegex(text, r"(?m)^%s \d+$" % name)
        log = readable_log(server.log_text())
        server.stop()
        for secret in (S3.secret_access_key,):
            self.assertNotIn(secret, json.dumps(health))
            self.assertNotIn(secret, text)
            self.assertNotIn(secret, log)
        plain = self.serve(cache_url=False)
        self.assertEqual(plain.call("GET", "/health")[1]["cache"], {"url": None, "read_only": False, "artifacts_url": None})
        self.assertEqual(plain.metric("larder_fleet_cache_hits_total"), 0)

    def test_no_log_line_holds_a_secret_even_when_the_bucket_refuses(self):
        secret = "wrong" + S3.secret_access_key[5:]
        server = self.serve("--log-level", "trace", env=S3.session_env(AWS_SECRET_ACCESS_KEY=secret))
        self.store(server)
        self.assertTrue(wait_until(lambda: warnings_with(server, "fleet cache"), 10))
        log = readable_log(server.log_text())
        server.stop()
        for value in (secret, S3.session["session_token"]):
            self.assertNotIn(value, log)

    def test_a_url_with_credentials_or_odd_bytes_is_refused_at_start(self):
        for url in ("s3://AKIAEXAMPLE:supersecretvalue@%s/x" % BUCKET, "s3://AKIAEXAMPLE@%s" % BUCKET,
                    "s3://%s/a prefix" % BUCKET, "s3://%s/caf\u00e9" % BUCKET, "https://%s/x" % BUCKET):
            done = subprocess.run([BINARY, "serve", "--port", "0", "--root", self.new_root(), "--fixtures", FIXTURES,
                                   "--cache-url", url], env=S3.larder_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
            self.assertNotEqual(done.returncode, 0, url)
            self.assertNotIn("listening", done.stdout)
            self.assertNotIn("supersecretvalue", done.stdout + done.stderr)
            self.assertTrue(done.stderr.strip(), "refused without saying why")
        # The same URL without them: the server starts.
        server = self.serve(cache_url="s3://%s/x" % BUCKET)
        self.assertEqual(server.call("GET", "/health")[1]["cache"]["url"], "s3://%s/x" % BUCKET)

    def test_the_settings_from_the_environment(self):
        artifacts = "s3://%s/%s/artifacts" % (ARTIFACTS, self.prefix)
        server = self.serve(cache_url=False, env=S3.larder_env(LARDER_CACHE_URL=self.url, LARDER_ARTIFACTS_URL=artifacts))
        self.assertEqual(server.call("GET", "/health")[1]["cache"], {"url": self.url, "read_only": False, "artifacts_url": artifacts})
        # AWS_ENDPOINT_URL_S3 comes before AWS_ENDPOINT_URL (here a port nobody listens on).
        self.store(server)
        self.published(server, server.metric("larder_template_builds_total"))
        other = self.serve(env=S3.larder_env(endpoint="http://127.0.0.1:%d" % free_port(), AWS_ENDPOINT_URL_S3=S3.endpoint))
        self.store(other)
        self.assertEqual((other.metric("larder_template_builds_total"), other.metric("larder_fleet_cache_errors_total")), (0, 0))


class SharedCacheFolder(FleetTest):
    def test_servers_of_one_machine_share_a_cache_folder(self):
        folder = os.path.join(self.scratch, "shared-cache")
        first, second = self.serve("--cache-dir", folder, cache_url=False), self.serve("--cache-dir", folder, cache_url=False)
        # Both at once, the same key: each entry built once on the machine.
        answers = [None, None]

        def make(i, server):
            answers[i] = server.call("POST", "/stores", GALLERY)
        threads = [threading.Thread(target=make, args=(i, s)) for i, s in enumerate((first, second))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual([a[0] for a in answers], [201, 201], answers)
        builds = [s.metric("larder_template_builds_total") for s in (first, second)]
        self.assertEqual(sum(builds), len(self.entries(folder)), "an entry was built twice: %s" % builds)
        self.assertEqual(sorted([self.origin(first, answers[0][1]), self.origin(second, answers[1][1])]), ["built", "machine"])
        self.assertEqual(answers[0][1]["counts"], answers[1][1]["counts"])
        # One after the other: the second finds the first's entry.
        partners = {"template": "gallery", "fixtures": ["partners"]}
        self.assertEqual(self.origin(first, self.store(first, partners)), "built")
        self.assertEqual(self.origin(second, self.store(second, partners)), "machine")
        self.assertEqual(second.metric("larder_template_builds_total"), builds[1])
        built = sum(s.metric("larder_template_builds_total") for s in (first, second))
        self.assertEqual(first.stop(), 0)
        # A new server on a new root, the same folder: everything is there.
        later = self.serve("--cache-dir", folder, cache_url=False)
        for body in (GALLERY, partners):
            self.assertEqual(self.origin(later, self.store(later, body)), "machine", body)
        self.assertEqual(later.metric("larder_template_builds_total"), 0)
        self.assertEqual(built, len(self.entries(folder)))


class LarderUp(FleetTest):
    def test_larder_up_keeps_its_cache_in_the_users_cache_folder(self):
        # `larder up` defaults --cache-dir to ${XDG_CACHE_HOME:-$HOME/.cache}/larder/cache: a second run builds nothing.
        project, tmp, xdg = (os.path.join(self.scratch, name) for name in ("project", "tmp", "xdg"))
        shutil.copytree(os.path.join(FIXTURES, "gallery"), os.path.join(project, "fixtures", "gallery"))
        os.mkdir(tmp)
        with open(os.path.join(project, "pyproject.toml"), "w") as f:
            f.write("[project]\nname = 'sample'\n")
        env = clean_environment(TMPDIR=tmp, XDG_CACHE_HOME=xdg)
        runs = os.path.join(tmp, "larder-%d" % os.getuid())
        for run in range(2):
            user = subprocess.Popen(["sleep", "600"])
            try:
                done = subprocess.run([BINARY, "up", "--for", str(user.pid)], cwd=project, env=env, capture_output=True, text=True, timeout=90)
                self.assertEqual(done.returncode, 0, done.stderr)
                url = done.stdout.strip()
                status, store, _ = call(url, "POST", "/stores", GALLERY)
                self.assertEqual(status, 201, store)
                self.assertEqual(metric(url, "larder_template_builds_total"), 1 - run, "run %d" % run)
            finally:
                user.terminate()
                user.wait()
            # The run's server goes after its last process, its folder with it.
            self.assertTrue(wait_until(lambda: not os.path.isdir(runs) or os.listdir(runs) == [], 30), os.listdir(runs))
        self.assertEqual(len(self.entries(os.path.join(xdg, "larder", "cache"))), 1)


class Artifacts(FleetTest):
    def test_a_kept_store_is_uploaded_as_a_zip(self):
        prefix = self.prefix + "/artifacts"
        server = self.serve("--artifacts-url", "s3://%s/%s" % (ARTIFACTS, prefix), "--artifacts-run", "run-42", cache_url=False)
        store = self.store(server, dict(GALLERY, label="tests/test_album.py::test sync é"))
        db = sqlite3.connect(store["path"])
        db.execute("INSERT INTO albums (title) VALUES ('kept by a failure')")
        db.commit()
        db.close()
        status, kept, _ = server.call("PATCH", "/stores/%s" % store["id"], {"keep": True})
        self.assertEqual(status, 200)
        unlabelled = self.store(server, {"template": "gallery"})
        self.assertEqual(server.call("PATCH", "/stores/%s" % unlabelled["id"], {"keep": "forever"})[0], 200)
        # Both uploaded, once each; their names are checked last.
        self.assertTrue(wait_until(lambda: server.metric("larder_artifact_uploads_total") == 2 and len(S3.list(ARTIFACTS, prefix + "/")) == 2, 60),
                        (S3.list(ARTIFACTS, prefix + "/"), server.log_text()[-2000:]))
        uploaded = S3.list(ARTIFACTS, prefix + "/")
        self.assertEqual(server.metric("larder_artifact_upload_errors_total"), 0)
        [labelled_name] = [name for name in uploaded if name.endswith("-%s.zip" % store["id"])] or [None]
        self.assertIsNotNone(labelled_name, uploaded)
        path = os.path.join(self.scratch, "artifact.zip")
        with open(path, "wb") as f:
            f.write(S3.get(ARTIFACTS, labelled_name))
        with zipfile.ZipFile(path) as z:
            self.assertIsNone(z.testzip())
            self.assertIn("store.sqlite", z.namelist())
            counts = sqlite_bytes(z.read("store.sqlite"), self.scratch)
            self.assertEqual(json.loads(z.read("manifest.json"))["id"], store["id"])
        self.assertEqual(counts["albums"], 1)
        self.assertEqual(counts["artworks"], 12)

        # Without --artifacts-run: the CI's run id.
        ci = self.serve("--artifacts-url", "s3://%s/%s" % (ARTIFACTS, prefix), cache_url=False,
                        env=S3.larder_env(GITHUB_RUN_ID="777", GITHUB_RUN_ATTEMPT="2"))
        third = self.store(ci, {"template": "gallery", "label": "ci"})
        self.assertEqual(ci.call("PATCH", "/stores/%s" % third["id"], {"keep": True})[0], 200)
        name = "%s/777-2/ci-%s.zip" % (prefix, third["id"])
        self.assertTrue(wait_until(lambda: name in S3.list(ARTIFACTS, prefix + "/"), 60), S3.list(ARTIFACTS, prefix + "/"))

        # Without a run's name or a CI's: the server's start time; a long label cut to 100 bytes.
        env = S3.larder_env()
        for name in ("GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT", "CI_PIPELINE_ID", "BUILDKITE_BUILD_ID"):
            env.pop(name, None)
        local = self.serve("--artifacts-url", "s3://%s/%s/local" % (ARTIFACTS, self.prefix), cache_url=False, env=env)
        fourth = self.store(local, {"template": "gallery", "label": "x" * 150})
        self.assertEqual(local.call("PATCH", "/stores/%s" % fourth["id"], {"keep": True})[0], 200)
        self.assertTrue(wait_until(lambda: len(S3.list(ARTIFACTS, self.prefix + "/local/")) == 1, 60))
        [name] = S3.list(ARTIFACTS, self.prefix + "/local/")
        self.assertRegex(name[len(self.prefix + "/local/"):], r"^\d{8}T\d{6}Z/%s-%s\.zip$" % ("x" * 100, fourth["id"]))

        # larder open, on the zip and on its s3:// URL: the diff against its creation state shows the test's row.
        self.open_and_look(path, S3.larder_env(), changed="kept by a failure")
        self.open_and_look("s3://%s/%s" % (ARTIFACTS, labelled_name), S3.larder_env(), changed="kept by a failure")
        # What a client saves (GET /artifact?base=true, as the clients ask) shows it too; without base.sqlite there is no diff.
        for base, changed in (("true", "kept by a failure"), ("false", None)):
            status, body, _ = server.call("GET", "/stores/%s/artifact?base=%s" % (store["id"], base))
            self.assertEqual(status, 200)
            saved = os.path.join(self.scratch, "saved-%s.zip" % base)
            with open(saved, "wb") as f:
                f.write(body)
            self.open_and_look(saved, S3.larder_env(), changed=changed)

        # The names: PREFIX/RUN/LABEL-ID.zip, the label's *bytes* outside [A-Za-z0-9._-] each
        # a "_" (é is two bytes: "__"), and PREFIX/RUN/ID.zip without a label.
        self.assertEqual(sorted(uploaded), sorted(["%s/run-42/tests_test_album.py__test_sync___-%s.zip" % (prefix, store["id"]),
                                                   "%s/run-42/%s.zip" % (prefix, unlabelled["id"])]))

    def open_and_look(self, what, env, changed=None):
        """`changed`: a value the page's diff must show; None: the page says the store is as created."""
        tmp = os.path.join(self.scratch, "open-tmp-%d" % len(os.listdir(self.scratch)))
        os.mkdir(tmp)
        env = dict(env, TMPDIR=tmp)
        process = subprocess.Popen([BINARY, "open", what, "--no-browser"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, env=env)
        try:
            url = first_line(process, 60).decode().strip()
            self.assertRegex(url, r"^http://127\.0\.0\.1:\d+(/|$)", (url, process.poll()))
            with urllib.request.urlopen(url, timeout=30) as answer:
                self.assertEqual(answer.status, 200)
                page = answer.read().decode("utf-8", "replace")
            for table in ("albums", "artists", "artworks"):
                self.assertIn(table, page)
            if changed is None:
                self.assertIn("nothing: the store is as it was created", page)
            else:
                self.assertIn(html.escape(changed), page)
                self.assertNotIn("nothing: the store is as it was created", page)
            made = os.listdir(tmp)
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                self.fail("larder open did not stop on SIGTERM")
            process.stdout.close()
            stderr = process.stderr.read().decode("utf-8", "replace")
            process.stderr.close()
        self.assertIn(process.returncode, (0, -signal.SIGTERM, 128 + signal.SIGTERM), stderr)
        self.assertTrue(made, "larder open made no temporary folder in TMPDIR")
        self.assertEqual(os.listdir(tmp), [], "larder open left %s (it had made %s)" % (os.listdir(tmp), made))


if __name__ == "__main__":
    run_tests("fleet")
