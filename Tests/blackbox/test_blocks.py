#!/usr/bin/env python3
"""Copies that share blocks (issue 48): on a file system with reflinks (an
XFS image with `-m reflink=1`, made and loop-mounted here), a store's
hand-out, its ready copies, a fork and a reset take no room whatever the
template's size; `GET /health` and `/metrics` say which world a root is in,
on any file system, as the kernel answers this test's own clone; and where
copies are whole, ready copies stay within their byte budget. The XFS
tests are skipped, with the reason, where the machine cannot make or mount
the image (not root, no xfsprogs, no loop device).

    python3 Tests/blackbox/test_blocks.py .build/debug/larder
"""
import errno
import fcntl
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from calls import metrics  # noqa: E402
from processes import Server, larder_binary, run_tests, scratch_folder, wait_until  # noqa: E402

BINARY = larder_binary()
FICLONE = 0x40049409  # _IOW(0x94, 9, int)
ROWS = 64_000  # about 64 MB of 1,000-byte rows


def write_template(folder):
    """A template `big`: one migration that writes ROWS rows of 1,000 random bytes."""
    migrations = os.path.join(folder, "big", "migrations")
    os.makedirs(migrations)
    with open(os.path.join(migrations, "0001_blobs.sql"), "w") as f:
        f.write("CREATE TABLE blobs (id INTEGER PRIMARY KEY, body BLOB NOT NULL);\n"
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %d)\n"
                "INSERT INTO blobs (body) SELECT randomblob(1000) FROM n;\n" % ROWS)
    return folder


def clones(folder):
    """Whether the kernel clones a file into another in `folder` (this test's own FICLONE)."""
    source, target = os.path.join(folder, "probe-a"), os.path.join(folder, "probe-b")
    try:
        with open(source, "wb") as a:
            a.write(b"L" * 65536)
        with open(source, "rb") as a, open(target, "wb") as b:
            try:
                fcntl.ioctl(b.fileno(), FICLONE, a.fileno())
                return True
            except OSError:
                return False
    finally:
        for path in (source, target):
            if os.path.exists(path):
                os.remove(path)


def used_bytes(path):
    info = os.statvfs(path)
    return (info.f_blocks - info.f_bfree) * info.f_frsize


def rows(path, table="blobs"):
    db = sqlite3.connect(path, timeout=5)
    try:
        return db.execute('SELECT count(*) FROM "%s"' % table).fetchone()[0]
    finally:
        db.close()


class XFSImage:
    """A 2 GiB sparse XFS image with reflinks, loop-mounted; SkipTest with
    the reason where that cannot be done."""

    def __init__(self):
        if os.geteuid() != 0:
            raise unittest.SkipTest("mounting an XFS image needs root")
        if shutil.which("mkfs.xfs") is None:
            raise unittest.SkipTest("no mkfs.xfs (Debian's xfsprogs; scripts/setup installs it)")
        self.folder = tempfile.mkdtemp(prefix="larder-xfs-")
        self.image, self.mount = os.path.join(self.folder, "image"), os.path.join(self.folder, "mnt")
        os.makedirs(self.mount)
        with open(self.image, "wb") as f:
            f.truncate(2 << 30)
        for command in (["mkfs.xfs", "-q", "-m", "reflink=1", self.image], ["mount", "-o", "loop", self.image, self.mount]):
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                shutil.rmtree(self.folder, ignore_errors=True)
                raise unittest.SkipTest("cannot make or mount an XFS image here: %s: %s" % (" ".join(command[:2]), done.stderr.strip()))

    def remove(self):
        subprocess.run(["umount", self.mount], capture_output=True)
        if os.path.ismount(self.mount):
            subprocess.run(["umount", "-l", self.mount], capture_output=True)
        shutil.rmtree(self.folder, ignore_errors=True)


class Larder(Server):
    def __init__(self, root, fixtures, *extra):
        super().__init__(BINARY, root, fixtures, *extra)

    def post(self, path, body=None):
        status, answer, _ = self.call("POST", path, body)
        if status not in (200, 201):
            raise AssertionError("POST %s: %s %s" % (path, status, answer))
        return answer


class Both(unittest.TestCase):
    """What the server says of any root: its claim is the kernel's answer."""

    def test_health_says_what_the_kernel_does(self):
        root = os.path.join(scratch_folder(self, "larder-blocks-"), "root")
        fixtures = write_template(scratch_folder(self, "larder-blocks-fixtures-"))
        larder = Larder(root, fixtures)
        self.addCleanup(larder.stop)
        status, health, _ = larder.call("GET", "/health")
        self.assertEqual(status, 200)
        expected = clones(root + "/tmp")
        self.assertEqual(health["storage"]["shares_blocks"], expected, health)
        self.assertIsInstance(health["storage"]["file_system"], str)
        self.assertEqual(metrics(larder.base)["larder_root_shares_blocks"], 1 if expected else 0)
        status, page, _ = larder.call("GET", "/", raw=True)
        self.assertIn("copies share blocks" if expected else "copies are whole", page.decode())

    def test_whole_copies_keep_ready_copies_within_their_byte_budget(self):
        folder = scratch_folder(self, "larder-blocks-")
        if clones(folder):
            self.skipTest("this machine's temporary folder shares blocks")
        fixtures = write_template(scratch_folder(self, "larder-blocks-fixtures-"))
        larder = Larder(folder + "/root", fixtures, "--cache-max-bytes", str(160 << 20))
        self.addCleanup(larder.stop)
        store = larder.post("/stores", {"template": "big"})
        wait_until(lambda: metrics(larder.base).get("larder_ready_copy_bytes", 0) > 0, 30)
        self.assertLessEqual(metrics(larder.base)["larder_ready_copy_bytes"], 160 << 20, "two copies at most, not sixteen")
        self.assertEqual(rows(store["path"]), ROWS)


class SharedBlocks(unittest.TestCase):
    """On XFS with reflinks: every copy takes no room, and stays isolated."""

    @classmethod
    def setUpClass(cls):
        cls.xfs = XFSImage()
        cls.fixtures = write_template(tempfile.mkdtemp(prefix="larder-blocks-fixtures-"))
        cls.larder = Larder(cls.xfs.mount + "/root", cls.fixtures, "--cache-max-bytes", str(160 << 20))
        store = cls.larder.post("/stores", {"template": "big"})
        # The cache entry built, and its ready copies made (all sixteen: they take no room).
        cls.settled = wait_until(lambda: metrics(cls.larder.base).get("larder_ready_copies") == 16, 60)
        cls.larder.call("DELETE", "/stores/" + store["id"])

    @classmethod
    def tearDownClass(cls):
        cls.larder.stop()
        shutil.rmtree(cls.fixtures, ignore_errors=True)
        cls.xfs.remove()

    def test_health_says_copies_share_blocks(self):
        _, health, _ = self.larder.call("GET", "/health")
        self.assertEqual(health["storage"], {"file_system": "xfs", "shares_blocks": True})
        self.assertTrue(self.settled, "sixteen ready copies of a 64 MB template over a 160 MB budget: they take no room")

    def test_handouts_and_forks_take_no_room_and_stay_isolated(self):
        before = used_bytes(self.xfs.mount)
        stores = [self.larder.post("/stores", {"template": "big"}) for _ in range(10)]
        forks = [self.larder.post("/stores", {"from": stores[0]["id"]}) for _ in range(5)]
        grown = used_bytes(self.xfs.mount) - before
        self.assertLess(grown, 16 << 20, "15 stores of 64 MB took %d MB" % (grown >> 20))
        self.assertTrue(all(s["counts"] == {"blobs": ROWS} for s in stores + forks), [s["counts"] for s in stores + forks])
        # A write into one is its own.
        db = sqlite3.connect(stores[0]["path"], isolation_level=None)
        db.execute("DELETE FROM blobs WHERE id <= 1000")
        db.close()
        fork = self.larder.post("/stores", {"from": stores[0]["id"]})
        self.assertEqual(fork["counts"], {"blobs": ROWS - 1000})
        self.assertEqual(rows(fork["path"]), ROWS - 1000)
        # Its creation state is cloned with it, before the answer (whole copies make it after).
        for made in forks + [fork]:
            self.assertTrue(os.path.exists(os.path.join(os.path.dirname(made["path"]), "base.sqlite")), made["id"])
        db = sqlite3.connect(fork["path"], isolation_level=None)
        db.execute("DELETE FROM blobs WHERE id <= 3000")
        db.close()
        status, answer, _ = self.larder.call("POST", "/stores/%s/reset" % fork["id"])
        self.assertEqual((status, answer["counts"]), (200, {"blobs": ROWS - 1000}), answer)
        self.assertEqual(rows(fork["path"]), ROWS - 1000)
        for other in stores[1:] + forks:
            self.assertEqual(rows(other["path"]), ROWS)
        for store in stores + forks + [fork]:
            self.larder.call("DELETE", "/stores/" + store["id"])

    def reset_and_check(self, store, connection=None):
        status, answer, _ = self.larder.call("POST", "/stores/%s/reset" % store["id"])
        self.assertEqual(status, 200, answer)
        self.assertEqual(answer["counts"], {"blobs": ROWS})
        if connection is not None:  # its next transaction sees the reset state
            self.assertEqual(connection.execute("SELECT count(*) FROM blobs").fetchone()[0], ROWS)
            self.assertEqual(connection.execute("SELECT count(*) FROM blobs WHERE id <= 2000").fetchone()[0], 2000)
        self.assertEqual(rows(store["path"]), ROWS)
        self.assertEqual(sqlite3.connect(store["path"]).execute("PRAGMA integrity_check").fetchone()[0], "ok")

    def test_a_reset_shares_the_bases_blocks_and_the_tests_connections_see_it(self):
        store = self.larder.post("/stores", {"template": "big"})
        inode = os.stat(store["path"]).st_ino
        db = sqlite3.connect(store["path"], isolation_level=None)
        db.execute("UPDATE blobs SET body = randomblob(1000) WHERE id <= 16000")  # about 16 MB of its own
        db.close()
        written = used_bytes(self.xfs.mount)
        self.reset_and_check(store)
        self.assertLess(used_bytes(self.xfs.mount), written - (8 << 20), "the written blocks are given back")
        self.assertEqual(os.stat(store["path"]).st_ino, inode, "the same file")

        self.larder.call("DELETE", "/stores/" + store["id"])

        # A connection in rollback-journal mode, open and idle, with pages in
        # its cache. (Out of WAL before the server keeps a connection to it.)
        store = self.larder.post("/stores", {"template": "big"})
        db = sqlite3.connect(store["path"], isolation_level=None)
        db.execute("PRAGMA journal_mode=DELETE")
        db.execute("DELETE FROM blobs WHERE id <= 2000")
        self.assertEqual(db.execute("SELECT count(*) FROM blobs").fetchone()[0], ROWS - 2000)
        self.reset_and_check(store, db)
        db.execute("INSERT INTO blobs (body) VALUES (x'00')")
        self.assertEqual(rows(store["path"]), ROWS + 1, "the test writes on after the reset")
        db.close()

        # One in WAL mode, open across the reset: the reset writes the pages instead.
        db = sqlite3.connect(store["path"], isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("DELETE FROM blobs WHERE id <= 2000")
        self.reset_and_check(store, db)
        db.close()
        self.larder.call("DELETE", "/stores/" + store["id"])

    def test_a_reset_never_clones_a_base_its_test_replaced_with_something_else(self):
        store = self.larder.post("/stores", {"template": "big"})
        base = os.path.join(os.path.dirname(store["path"]), "base.sqlite")
        db = sqlite3.connect(store["path"], isolation_level=None)
        db.execute("PRAGMA journal_mode=DELETE")
        db.execute("DELETE FROM blobs WHERE id <= 10")
        db.close()
        os.remove(base)
        with open(base, "wb") as f:
            f.write(os.urandom(1 << 20))
        status, answer, _ = self.larder.call("POST", "/stores/%s/reset" % store["id"])
        self.assertGreaterEqual(status, 400, answer)
        self.assertEqual(rows(store["path"]), ROWS - 10, "the store as it was")
        # Another database, of another page size, in its place: reset to it, page by page.
        os.remove(base)
        other = sqlite3.connect(base)
        other.execute("PRAGMA page_size=8192")
        other.execute("CREATE TABLE blobs (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
        other.execute("INSERT INTO blobs (body) VALUES (x'01')")
        other.commit()
        other.close()
        status, answer, _ = self.larder.call("POST", "/stores/%s/reset" % store["id"])
        self.assertEqual(status, 200, answer)
        self.assertEqual(rows(store["path"]), 1)
        self.assertEqual(sqlite3.connect(store["path"]).execute("PRAGMA integrity_check").fetchone()[0], "ok")
        self.larder.call("DELETE", "/stores/" + store["id"])


if __name__ == "__main__":
    run_tests("blocks")
