"""Each of Larder's operations against its physical floor, measured in the
same run on the same file system (issue 31): what the least work an
operation must do costs on this machine, next to what Larder takes for it.
It only prints numbers; nothing here fails on a figure.

    floors.measure(bench, root, seconds, stores, quick) -> dict
    floors.table(that dict) -> a markdown table

`bench` is bench/run's module: its Server, timed, artifact_run, blob_store,
sh, and FLOOR (bench/floor.c, built); bench/loadgen.py runs the load.
The Larder server runs on `root`; the floors' scratch files sit beside it
(same file system), and both are removed at the end.
"""
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
import urllib.parse

import calls  # Tests/support, on the path bench/run gives
import loadgen
import processes

GALLERY = {"template": "gallery", "fixtures": ["artists", "artworks"]}


def fs_type(path):
    """The type of the file system holding `path` (the longest mount point
    above it); "ext4, no journal" where the kernel runs one without (its
    /sys/fs/ext4/DEVICE/journal_task says <none>): there, allocating an
    inode steps over those freed in the last minutes, which Larder's
    staging shards are for."""
    path, best, kind, source = os.path.realpath(path), "", "?", ""
    with open("/proc/mounts") as f:
        for line in f:
            device, point, fstype = line.split()[:3]
            point = point.replace("\\040", " ")
            if (path == point or path.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
                best, kind, source = point, fstype, device
    if kind == "ext4":
        try:
            with open("/sys/fs/ext4/%s/journal_task" % os.path.basename(source)) as f:
                if f.read().strip() == "<none>":
                    kind = "ext4, no journal"
        except OSError:
            pass
    return kind


def p50(values):
    return sorted(values)[len(values) // 2]


def metrics(server):
    """The server's unlabelled metrics, by name ({} for a server without them)."""
    return calls.metrics(server.base)


def settle(server, timeout=20):
    """Waits until the trash is empty and the ready copies stop changing, so a
    load point does not pay for the one before it."""
    last = [None]

    def settled():
        m = metrics(server)
        now = (m.get("larder_trash_backlog", 0), m.get("larder_ready_copies"))
        done, last[0] = now[0] == 0 and now == last[0], now
        return done
    processes.wait_until(settled, timeout, interval=0.25)


class Rows:
    """The table's rows: an operation with Larder's figure, the floor its goal
    is stated against, the ratio of the two and whether the goal is met; and
    beneath it, other floors measured for it (ratio: Larder's figure over each)."""

    def __init__(self):
        self.rows, self.larder = [], None

    def add(self, operation, larder, unit, floor=None, floor_name="", goal="", met=None):
        ratio = larder / floor if larder is not None and floor else None
        self.larder = larder
        self.rows.append({"operation": operation, "larder": larder, "unit": unit, "floor": floor, "floor_name": floor_name,
                          "ratio": ratio, "goal": goal, "met": None if met is None or larder is None else bool(met(larder, ratio))})

    def also(self, floor_name, floor, unit):
        """A further floor of the last operation added."""
        self.rows.append({"operation": "", "larder": None, "unit": unit, "floor": floor, "floor_name": floor_name,
                          "ratio": self.larder / floor if self.larder is not None and floor else None, "goal": "", "met": None})


class Run:
    def __init__(self, bench, root, seconds, stores, quick):
        self.bench, self.root, self.seconds, self.stores, self.quick = bench, root, seconds, stores, quick
        self.scratch = tempfile.mkdtemp(prefix="larder-floor-", dir=os.path.dirname(os.path.abspath(root)))
        self.rows, self.raw, self.notes, self.phases = Rows(), {}, [], {}
        self.server = None

    def floor(self, *args):
        out = subprocess.run([self.bench.FLOOR, *map(str, args)], check=True, capture_output=True, text=True).stdout
        return json.loads(out)

    def load(self, mode, arg, clients, seconds=None, path=None):
        """A loadgen run, with the ready copies it took and missed (a miss: a
        store made while the pool of its template entry was empty)."""
        settle(self.server)
        before = metrics(self.server)
        out = loadgen.run(self.server.port, mode, arg, clients, seconds or self.seconds, path=path, allow_errors=True)
        after = metrics(self.server)
        for name in ("handouts", "misses"):
            key = "larder_ready_copy_%s_total" % name
            if key in after:
                out["ready_" + name] = int(after[key] - before.get(key, 0))
        if out["errors"]:
            self.notes.append("%d errors in loadgen %s %s, %d clients" % (out["errors"], mode, path or arg, clients))
        return out

    def phase(self, name, began):
        self.phases[name] = round(time.monotonic() - began, 1)
        return time.monotonic()

    def measure(self):
        # What an earlier run left to write back (a removed root of many
        # stores) must not be measured with this one.
        os.sync()
        time.sleep(2)
        began = time.monotonic()
        try:
            self.server = self.bench.Server(self.root)
            self.server.call("DELETE", "/stores/" + self.server.call("POST", "/stores", GALLERY)[1]["id"])  # the cache entry
            t = time.monotonic()
            for name, step in (("cycles", self.handout_and_cycles), ("reset", self.reset), ("fork", self.fork),
                               ("artifact", self.artifact), ("many stores", self.many_stores)):
                step()
                t = self.phase(name, t)
        finally:
            t = time.monotonic()
            if self.server:
                self.server.stop()
            subprocess.run(["rm", "-rf", self.root, self.scratch])
            os.sync()
            self.phase("cleanup", t)
        return {"root": self.root, "fstype": fs_type(os.path.dirname(os.path.abspath(self.root))), "seconds_per_point": self.seconds,
                "stores": self.stores, "rows": self.rows.rows, "raw": self.raw, "notes": self.notes, "phase_seconds": self.phases,
                "took_seconds": round(time.monotonic() - began, 1)}

    # Rows 1 to 3: POST /stores, DELETE, cycles/s by clients.
    def handout_and_cycles(self):
        gallery = json.dumps(GALLERY)
        health = self.load("get", "/health", 1)
        httpd = subprocess.Popen([self.bench.FLOOR, "httpd", "0"], stdout=subprocess.PIPE)
        try:
            line = processes.first_line(httpd, 10).decode()
            c_httpd = loadgen.run(int(line.rsplit(" ", 1)[1]), "get", "/", 1, self.seconds)
        finally:
            processes.stop(httpd)
        handout = self.floor("handout", self.scratch, 2000)
        rename = self.floor("rename", self.scratch, 2000)
        cycles = {clients: self.load("cycle", gallery, clients) for clients in (1, 4, 16, 64)}
        self.raw.update(health_1=health, c_httpd_1=c_httpd, c_handout=handout, c_rename=rename,
                        cycles={str(k): v for k, v in cycles.items()})
        one = cycles[1]
        rows = self.rows
        rows.add("POST /stores p50 (gallery + 2 fixtures, 1 client)", one["p50_ms"], "ms", health["p50_ms"], "GET /health p50",
                 "<= 1.5x /health", lambda v, r: r <= 1.5)
        rows.also('C libmicrohttpd "ok" p50', c_httpd["p50_ms"], "ms")
        rows.also("C write JSON + rename dir p50", handout["p50_ms"], "ms")
        rows.add("POST /stores p99 (1 client)", one["p99_ms"], "ms", goal="<= 1 ms", met=lambda v, r: v <= 1)
        rows.add("DELETE /stores/{id} p50 (1 client)", one["delete_p50_ms"], "ms", health["p50_ms"], "GET /health p50",
                 "<= 1.5x /health", lambda v, r: r <= 1.5)
        rows.also("C rename(2) of a dir p50", rename["p50_ms"], "ms")
        rows.add("create+delete cycles/s, 1 client", one["per_second"], "/s")
        rows.add("create+delete cycles/s, 4 clients", cycles[4]["per_second"], "/s", one["per_second"], "1 client")
        rows.add("create+delete cycles/s, 16 clients", cycles[16]["per_second"], "/s", one["per_second"], "1 client",
                 ">= 2x 1 client", lambda v, r: r >= 2)
        rows.add("create+delete cycles/s, 64 clients", cycles[64]["per_second"], "/s", cycles[16]["per_second"], "16 clients",
                 ">= 1x 16 clients", lambda v, r: r >= 1)
        # Held for longer than a load point: churn that slows a file system
        # over a minute (ext4 without a journal steps over recently freed inodes) shows only here.
        held = [loadgen.run(self.server.port, "cycle", gallery, 4, 5)["per_second"]
                for _ in range(2 if self.quick else 6)]
        self.raw.update(held_4=held)
        rows.add("create+delete cycles/s, 4 clients held %d s: its last 5 s" % (5 * len(held)), held[-1], "/s", held[0], "its first 5 s",
                 ">= 0.8x its first 5 s", lambda v, r: r >= 0.8)
        missed = ["%d clients %d of %d" % (k, v["ready_misses"], v["ready_misses"] + v["ready_handouts"])
                  for k, v in cycles.items() if v.get("ready_misses")]
        if missed:
            self.notes.append("POSTs made with no ready copy at hand: " + ", ".join(missed))

    # Row 4: reset under an open connection, against open + backup + close.
    def reset(self):
        store = self.server.call("POST", "/stores", GALLERY)[1]
        base = os.path.join(os.path.dirname(store["path"]), "base.sqlite")
        db = sqlite3.connect(store["path"], isolation_level=None)
        db.execute("DELETE FROM artworks")  # something to undo; the connection stays open throughout
        try:
            if self.server.call("POST", "/stores/%s/reset" % store["id"])[0] != 200 or not os.path.isfile(base):
                self.rows.add("POST /stores/{id}/reset p50", None, "ms", goal="(no reset or no base.sqlite in this binary)")
                return
            reset = self.load("post", "", 1, path="/stores/%s/reset" % store["id"])
            assert db.execute("SELECT count(*) FROM artworks").fetchone()[0] == 12
            whole, backup = [], []
            for _ in range(100 if self.quick else 300):
                t0 = time.perf_counter()
                source = sqlite3.connect("file:%s?mode=ro" % urllib.parse.quote(base), uri=True)
                target = sqlite3.connect(store["path"])
                t1 = time.perf_counter()
                source.backup(target)
                t2 = time.perf_counter()
                source.close()
                target.close()
                whole.append((time.perf_counter() - t0) * 1e3)
                backup.append((t2 - t1) * 1e3)
        finally:
            db.close()
            self.server.call("DELETE", "/stores/" + store["id"])
        self.raw.update(reset=reset, py_open_backup_close_p50_ms=p50(whole), py_backup_p50_ms=p50(backup))
        self.rows.add("POST /stores/{id}/reset p50 (gallery + 2 fixtures, open connection)", reset["p50_ms"], "ms", p50(whole),
                      "Python open + backup + close p50", "<= 1.5x open+backup+close", lambda v, r: r <= 1.5)
        self.rows.also("Python backup() alone p50", p50(backup), "ms")

    # Row 5: fork of a 1 MB and of a 100 MB store, against cp, copy_file_range and SQLite's backup.
    def fork(self):
        for megabytes, runs in ((1, 21), (100, 3 if self.quick else 5)):
            store = self.server.call("POST", "/stores")[1]
            db = sqlite3.connect(store["path"])
            db.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, body BLOB)")
            db.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
                       "INSERT INTO rows (body) SELECT randomblob(1000) FROM n", (megabytes * 950,))
            db.commit()
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            db.close()
            size = os.path.getsize(store["path"]) / 1e6
            fork = self.load("cycle", json.dumps({"from": store["id"]}), 1)
            copy = os.path.join(self.scratch, "fork-copy.sqlite")
            cp = []
            for _ in range(runs):
                t0 = time.perf_counter()
                self.bench.sh("cp", store["path"], copy)
                cp.append((time.perf_counter() - t0) * 1e3)
                os.remove(copy)
            cfr = self.floor("copy", store["path"], copy, runs * 2)
            backup = []
            for _ in range(runs):
                source, target = sqlite3.connect(store["path"]), sqlite3.connect(copy)
                t0 = time.perf_counter()
                source.backup(target)
                backup.append((time.perf_counter() - t0) * 1e3)
                source.close()
                target.close()
                os.remove(copy)
            self.server.call("DELETE", "/stores/" + store["id"])
            self.raw["fork_%d_mb" % megabytes] = {"size_mb": size, "larder": fork, "cp_p50_ms": p50(cp), "copy_file_range": cfr,
                                                  "py_backup_p50_ms": p50(backup)}
            self.rows.add("fork of a %.1f MB store (POST {from}) p50, 1 client" % size, fork["p50_ms"], "ms", p50(cp),
                          "cp p50 (process)", "<= 1.2x cp", lambda v, r: r <= 1.2)
            self.rows.also("C copy_file_range p50", cfr["p50_ms"], "ms")
            self.rows.also("Python backup() into a new file p50", p50(backup), "ms")

    # Row 6: the artifact of a large store, against zip and pigz of the same file; best of 2 each, alternated.
    def artifact(self):
        store, size = self.bench.blob_store(self.server, 400 if self.quick else 3300)
        shutil.copyfile(store["path"], os.path.join(self.scratch, "copy.sqlite"))
        settle(self.server)
        os.sync()  # what was just written is not flushed during the runs
        tools, larder = {}, {}
        for _ in range(2):
            for name, command, out in (("zip -1", ["zip", "-1", "-q", "copy.zip", "copy.sqlite"], "copy.zip"),
                                       ("pigz -1 -p 2", ["pigz", "-1", "-p", "2", "-k", "-f", "copy.sqlite"], "copy.sqlite.gz"),
                                       ("zip -0", ["zip", "-0", "-q", "copy.zip", "copy.sqlite"], "copy.zip")):
                if shutil.which(command[0]) is None:
                    continue
                t0 = time.perf_counter()
                self.bench.sh(*command, cwd=self.scratch)
                tools[name] = max(tools.get(name, 0), size / (time.perf_counter() - t0))
                os.remove(os.path.join(self.scratch, out))
            for compression in ("deflate", "store"):
                seconds, sent, grew = self.bench.artifact_run(self.server, store["id"], compression)
                if size / seconds > larder.get(compression, {}).get("mb_per_s", 0):
                    larder[compression] = {"mb_per_s": size / seconds, "seconds": seconds, "bytes": sent, "rss_growth_mib": grew}
        os.remove(os.path.join(self.scratch, "copy.sqlite"))
        self.server.call("DELETE", "/stores/" + store["id"])
        self.raw["artifact"] = {"size_mb": size, "larder": larder, "tools_mb_per_s": tools}
        for tool in ("zip", "pigz"):
            if shutil.which(tool) is None:
                self.notes.append("%s is not installed" % tool)
        deflate, stored = larder["deflate"]["mb_per_s"], larder["store"]["mb_per_s"]
        self.rows.add("artifact ?compression=deflate of a %.0f MB store, MB/s (best of 2)" % size, deflate, "MB/s", tools.get("zip -1"),
                      "zip -1", ">= 1.5x zip -1", lambda v, r: r is not None and r >= 1.5)
        self.rows.add("artifact ?compression=deflate, MB/s, against pigz", deflate, "MB/s", tools.get("pigz -1 -p 2"), "pigz -1 -p 2",
                      ">= 1x pigz -1", lambda v, r: r is not None and r >= 1)
        self.rows.add("artifact ?compression=store, MB/s", stored, "MB/s", tools.get("zip -0"), "zip -0", ">= 0.8x zip -0",
                      lambda v, r: r is not None and r >= 0.8)

    # Row 7: many stores: memory, restart against a scan of their directories, listings.
    def many_stores(self):
        settle(self.server)
        rss = processes.rss_kib(self.server.pid)
        made = self.load("create", json.dumps(dict(GALLERY, label="many")), 4, seconds=self.stores)
        settle(self.server)
        grown = (processes.rss_kib(self.server.pid) - rss) / 1024
        t0 = time.monotonic()
        code = self.server.stop()
        stop_s = time.monotonic() - t0
        self.server = None
        self.server = self.bench.Server(self.root, fresh=False, ready_timeout=600)
        restart_s = self.server.startup_seconds
        live = self.server.call("GET", "/health")[1].get("stores")
        first = self.bench.timed(self.server.base, "GET", "/stores?limit=10000", None, 1)["p50_ms"]
        scan = self.floor("scan", os.path.join(self.root, "stores"), 3)
        pages = {path: self.bench.timed(self.server.base, "GET", path, None, 5) for path in ("/stores?limit=10000", "/stores", "/")}
        # A suite's stores deleted at once, oldest first (as the reaper removes expired ones).
        bulk = self.bench.timed(self.server.base, "DELETE", "/stores?label=many", None, 1)["p50_ms"]
        self.raw["many"] = {"create": made, "rss_growth_mib": grown, "stop_seconds": stop_s, "stop_code": code,
                            "restart_seconds": restart_s, "live_after_restart": live, "scan": scan, "first_listing_ms": first, "pages": pages,
                            "delete_all_ms": bulk}
        if live != self.stores:
            self.notes.append("%d stores made, GET /health says %s after the restart" % (self.stores, live))
        n = "%dk" % (self.stores // 1000) if self.stores % 1000 == 0 else str(self.stores)
        self.rows.add("create %s stores (4 clients), stores/s" % n, made["per_second"], "/s")
        self.rows.add("server RSS growth per 10k stores", grown / self.stores * 10_000, "MiB")
        self.rows.add("stop (SIGTERM) with %s stores" % n, stop_s * 1e3, "ms")
        self.rows.add("restart with %s stores, start to listening line" % n, restart_s * 1e3, "ms", scan["p50_ms"],
                      "C readdir + stat of each dir and file", "<= 2x scan", lambda v, r: r <= 2)
        self.rows.add("GET /stores?limit=10000 p50 (%s stores)" % n, pages["/stores?limit=10000"]["p50_ms"], "ms",
                      goal="<= 100 ms", met=lambda v, r: v <= 100)
        self.rows.add("GET /stores?limit=10000, the first after the restart", first, "ms", goal="<= 100 ms", met=lambda v, r: v <= 100)
        self.rows.add("GET /stores p50 (default page)", pages["/stores"]["p50_ms"], "ms", goal="<= 100 ms", met=lambda v, r: v <= 100)
        self.rows.add("GET / (dashboard) p50", pages["/"]["p50_ms"], "ms", goal="<= 50 ms", met=lambda v, r: v <= 50)
        self.rows.add("DELETE /stores?label= of all %s stores" % n, bulk, "ms", self.raw["c_rename"]["p50_ms"] * self.stores,
                      "C rename(2) p50, once per store")


def measure(bench, root, seconds, stores, quick=False):
    """Every row on one root; a dict of rows (see Rows) and raw figures."""
    return Run(bench, root, seconds, stores, quick).measure()


def figure(value, unit):
    if value is None:
        return "—"
    if unit == "ms":
        return "%.3f ms" % value if value < 10 else "%.1f ms" % value if value < 1000 else "%.2f s" % (value / 1e3)
    if unit in ("/s", "MB/s"):
        return "%.0f %s" % (value, unit)
    return "%.2f %s" % (value, unit)


def table(result):
    """A markdown table of one root's rows, with its notes."""
    lines = ["", "### %s (%s): each operation against its floor, %d s per load point" % (result["fstype"], result["root"],
                                                                                        result["seconds_per_point"]),
             "", "| operation | Larder | floor (same run) | ratio | goal | met |", "|---|---|---|---|---|---|"]
    for r in result["rows"]:
        floor = "%s (%s)" % (figure(r["floor"], r["unit"]), r["floor_name"]) if r["floor"] is not None else "—"
        operation = r["operation"] or "  ↳ floor"
        met = {True: "yes", False: "**no**", None: ""}[r["met"]]
        ratio = "%.2fx" % r["ratio"] if r["ratio"] is not None else "—"
        larder = figure(r["larder"], r["unit"]) if r["operation"] else ""
        lines.append("| %s | %s | %s | %s | %s | %s |" % (operation, larder, floor, ratio, r["goal"], met))
    lines.append("")
    lines.append("Took %.0f s (%s)." % (result["took_seconds"], ", ".join("%s %.0f s" % kv for kv in result["phase_seconds"].items())))
    for note in result["notes"]:
        lines.append("Note: " + note + ".")
    return "\n".join(lines)
