#!/usr/bin/env python3
"""What the server acknowledges survives a power cut: strace watches the
running server, and every answer to a create, an upload, a keep and a
delete must come after the syncs that put that change on disk (the
journal's line, the rename into or out of stores/, the store's files). On
tmpfs, or with --sync off, Larder syncs nothing.

    python3 Tests/blackbox/test_durability.py .build/debug/larder
"""
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from processes import run_tests, scratch_folder, wait_until  # noqa: E402
from test_client import Larder  # noqa: E402  (the same server harness)

CALLS = "write,pwrite64,fsync,fdatasync,syncfs,rename,renameat,renameat2,sendto,sendmsg,writev"
# `PID name(args) = result`, `PID name(args <unfinished ...>`, `PID <... name resumed>...) = result`
LINE = re.compile(r"^(\d+)\s+(?:<\.\.\. (\w+) resumed>(.*)|(\w+)\((.*))$")


class Trace:
    """strace attached to the running server (every thread), its output
    read back as an ordered list of (call, arguments, finished) events.
    An unfinished call is an event when it starts (a send), and one again
    when it finishes (a sync), each with the arguments it was called with."""

    def __init__(self, pid):
        self.out = tempfile.NamedTemporaryFile(prefix="larder-strace-", suffix=".txt", delete=False).name
        self.process = subprocess.Popen(["strace", "-f", "-y", "-s", "300", "-e", "trace=" + CALLS, "-o", self.out, "-p", str(pid)],
                                        stderr=subprocess.PIPE)
        line = self.process.stderr.readline().decode()
        if "attached" not in line:
            self.process.kill()
            raise unittest.SkipTest("strace cannot attach here: " + line.strip())

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=30)
        os.unlink(self.out)

    def events(self):
        events, pending = [], {}
        with open(self.out, errors="replace") as f:
            for text in f:
                match = LINE.match(text.rstrip("\n"))
                if not match:
                    continue
                pid, resumed, rest, name, arguments = match.groups()
                if resumed:
                    events.append((resumed, pending.pop(pid, ""), True))
                elif arguments.endswith("<unfinished ...>"):
                    pending[pid] = arguments
                    events.append((name, arguments, False))
                else:
                    events.append((name, arguments, True))
        return events

    def sees(self, marker):
        """Whether a send of `marker` (an answer's first bytes) was traced yet."""
        return any(call in ("sendto", "sendmsg", "writev", "write") and marker in arguments for call, arguments, _ in self.events())


def descriptor(arguments):
    """The path strace -y shows for a call's first argument (`7</a/b>`)."""
    match = re.match(r"\d+<([^>]*)>", arguments)
    return match.group(1) if match else None


class DurabilityTests(unittest.TestCase):
    def setUp(self):
        if shutil.which("strace") is None:
            self.skipTest("no strace (scripts/setup installs it)")
        self.scratch = scratch_folder(self, "larder-durable-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None)

    def serve(self, root, *extra):
        larder = Larder(root, *extra)
        self.addCleanup(larder.stop)
        trace = Trace(larder.pid)
        self.addCleanup(trace.stop)
        # Traced from here on: a health answer seen in the trace says so (every thread was attached with it).
        self.assertTrue(wait_until(lambda: larder.call("GET", "/health") and trace.sees("HTTP/1.1 200"), 30, interval=0),
                        "strace never saw an answer")
        return larder, trace

    def index(self, events, start, test, what):
        for at in range(start, len(events)):
            if test(*events[at]):
                return at
        self.fail("not traced: " + what)

    def answered(self, events, start, status):
        return self.index(events, start, lambda call, arguments, finished: call in ("sendto", "sendmsg", "writev", "write")
                          and ("HTTP/1.1 %d " % status) in arguments, "the %d answer" % status)

    def synced_between(self, events, start, end, path, what, whole=False):
        """A finished sync of `path` (or, `whole`, of its file system) between `start` and `end`."""
        synced = [at for at in range(start, end) if events[at][2] and (
            (events[at][0] in ("fsync", "fdatasync") and descriptor(events[at][1]) == path) or (whole and events[at][0] == "syncfs"))]
        self.assertTrue(synced, "%s: no sync of %s before its answer" % (what, path))

    def test_acknowledged_changes_are_on_disk_before_their_answers(self):
        root = os.path.realpath(os.path.join(self.scratch, "root"))
        larder, trace = self.serve(root)
        journal, stores = root + "/stores.journal", root + "/stores"

        def journaled(id, what, status):
            """The journal line naming `id` written, synced, then answered."""
            events = trace.events()
            line = self.index(events, 0, lambda call, arguments, finished: call == "write" and descriptor(arguments) == journal
                              and id in arguments and what(arguments), "the journal line of " + id)
            answer = self.answered(events, line, status)
            self.synced_between(events, line, answer, journal, "the line of " + id)
            return events, answer

        def entered(id):
            """The store's rename into stores/ and its answer: its files and
            its entry on disk in between, or its files before it (each synced,
            or its file system in one call, as ready copies made ahead are)."""
            events, answer = journaled(id, lambda arguments: True, 201)
            moved = [at for at in range(answer) if events[at][0].startswith("rename") and ('/stores/%s"' % id) in events[at][1]]
            self.assertTrue(moved, "no rename of %s into stores/" % id)
            self.synced_between(events, moved[-1], answer, stores, "the store into stores/", whole=True)
            files = any(e[0] in ("fsync", "fdatasync") and e[2] and "/%s/store.sqlite" % id in (descriptor(e[1]) or "") for e in events[:moved[-1]])
            if not files:
                self.synced_between(events, moved[-1], answer, None, "the store's files", whole=True)

        # A store from a template made for the request, then one of the ready copies made ahead.
        body = {"template": "gallery", "fixtures": ["artists", "artworks"]}
        status, store, _ = larder.call("POST", "/stores", body)
        self.assertEqual(status, 201, store)
        entered(store["id"])
        self.assertTrue(wait_until(lambda: larder.metric("larder_ready_copies"), 60), "no ready copy was made")
        status, store, _ = larder.call("POST", "/stores", body)
        self.assertEqual(status, 201, store)
        entered(store["id"])

        # An upload: the uploaded file, then its entry.
        upload = os.path.join(self.scratch, "upload.sqlite")
        db = sqlite3.connect(upload)
        db.execute("CREATE TABLE t (x)")
        db.commit()
        db.close()
        with open(upload, "rb") as f:
            status, uploaded, _ = larder.call("POST", "/stores", f.read(), "application/vnd.sqlite3")
        self.assertEqual(status, 201, uploaded)
        entered(uploaded["id"])

        # A keep.
        status, kept, _ = larder.call("PATCH", "/stores/" + store["id"], {"keep": True})
        self.assertEqual(status, 200, kept)
        journaled(store["id"], lambda arguments: 'keep\\":true' in arguments, 200)  # (strace shows " as \\")

        # A delete: its rename out of stores/, synced before the 204.
        status, _, _ = larder.call("DELETE", "/stores/" + uploaded["id"])
        self.assertEqual(status, 204)
        events = trace.events()
        out = self.index(events, 0, lambda call, arguments, finished: call.startswith("rename")
                         and ('/stores/%s"' % uploaded["id"]) in arguments.split(",")[0 if call == "rename" else 1], "the delete's rename")
        self.synced_between(events, out, self.answered(events, out, 204), stores, "the delete")

    def test_nothing_is_synced_on_tmpfs_or_when_off(self):
        roots = [(os.path.join(self.scratch, "off"), ("--sync", "off"))]
        if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
            shm = scratch_folder(self, "larder-durable-", dir="/dev/shm")
            roots.append((os.path.join(shm, "root"), ()))
        for root, extra in roots:
            larder, trace = self.serve(root, *extra)
            for _ in range(3):
                status, store, _ = larder.call("POST", "/stores", {"template": "gallery"})
                self.assertEqual(status, 201, store)
                self.assertEqual(larder.call("PATCH", "/stores/" + store["id"], {"keep": True})[0], 200)
                self.assertEqual(larder.call("DELETE", "/stores/" + store["id"])[0], 204)
            # (SQLite syncs a template it builds in cache/ as its own settings say.)
            syncs = [e for e in trace.events() if e[0] == "syncfs" or e[0] in ("fsync", "fdatasync")
                     and re.match(re.escape(os.path.realpath(root)) + "/(stores|building)", descriptor(e[1]) or "")]
            self.assertEqual(syncs, [], root)


if __name__ == "__main__":
    run_tests("durability")
