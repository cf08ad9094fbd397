"""The floors table's rows for a large template (issue 48): a 1 GB seeded
template on a file system whose copies are whole (ext4) and on one whose
copies share blocks (XFS with reflinks, a loop-mounted image the bench
makes; root, xfsprogs and a loop device needed, else the rows say why).
It only prints numbers; nothing here fails on a figure.

    large.measure(bench, parent, label, megabytes) -> dict   (rows on a root in `parent`)
    large.xfs_image(folder, gigabytes) -> (mount point, remove) or (None, why)
    large.table(results) -> a markdown table

Each root gets a server (default settings but no store cap; on XFS also
with --sync off, as `larder up` runs it: there every hand-out's fsyncs,
through the loop device, are most of its time) and a
fixtures folder with one template, `large`, one migration writing
`megabytes` MB of 1,000-byte rows. Measured: the template's build; a
hand-out that finds a ready copy, and one that finds none (a server with
--ready-copies 0), each against `cp` of the file (whole, and with
--reflink=always where the file system shares blocks); a fork of an
unchanged store and of one its test just wrote; a reset with no
connection open; and the room taken by the ready copies and by ten
hand-outs and five forks.
"""
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time

import floors
import processes  # Tests/support, on the path bench/run gives

TEMPLATE = {"template": "large"}


def xfs_image(folder, gigabytes):
    """An XFS image with reflinks in `folder`, loop-mounted: (mount point,
    remove) or (None, why not)."""
    if os.geteuid() != 0:
        return None, "mounting an XFS image needs root"
    if shutil.which("mkfs.xfs") is None:
        return None, "no mkfs.xfs (Debian's xfsprogs)"
    image, mount = os.path.join(folder, "xfs.image"), os.path.join(folder, "xfs")
    os.makedirs(mount, exist_ok=True)
    with open(image, "wb") as f:
        f.truncate(gigabytes << 30)

    def remove():
        subprocess.run(["umount", mount], capture_output=True)
        if os.path.ismount(mount):
            subprocess.run(["umount", "-l", mount], capture_output=True)
        shutil.rmtree(mount, ignore_errors=True)
        os.remove(image)

    for command in (["mkfs.xfs", "-q", "-f", "-m", "reflink=1", image], ["mount", "-o", "loop", image, mount]):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            remove()
            return None, "%s failed: %s" % (command[0], done.stderr.strip())
    return mount, remove


def used(path):
    info = os.statvfs(path)
    return (info.f_blocks - info.f_bfree) * info.f_frsize


def timed_ms(work):
    began = time.perf_counter()
    answer = work()
    return (time.perf_counter() - began) * 1e3, answer


def median(values):
    return sorted(values)[len(values) // 2] if values else None


def post(server, path, body=None):
    answer = server.call("POST", path, body)
    if answer.status not in (200, 201):
        raise RuntimeError("POST %s: %s %s" % (path, answer.status, answer.body))
    return answer.body


def settle(server, seconds=300):
    floors.settle(server, seconds)


def durable_write_ms(folder, runs=50):
    """The floor of a durable hand-out: a small file written and fsynced,
    renamed, its directory fsynced (p50, Python)."""
    took = []
    for i in range(runs):
        began = time.perf_counter()
        path = os.path.join(folder, "durable-%d" % i)
        fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, b"{}" * 100)
        os.fsync(fd)
        os.close(fd)
        os.rename(path + ".tmp", path)
        directory = os.open(folder, os.O_RDONLY)
        os.fsync(directory)
        os.close(directory)
        took.append((time.perf_counter() - began) * 1e3)
        os.remove(path)
    return median(took)


def measure(bench, parent, label, megabytes, *extra):
    """The rows on a root made in `parent` (a file system's folder), the
    server started with `extra` settings besides."""
    scratch = tempfile.mkdtemp(prefix="larder-large-", dir=parent)
    fixtures = os.path.join(scratch, "fixtures")
    os.makedirs(os.path.join(fixtures, "large", "migrations"))
    with open(os.path.join(fixtures, "large", "migrations", "0001_rows.sql"), "w") as f:
        f.write("CREATE TABLE rows (id INTEGER PRIMARY KEY, body BLOB NOT NULL);\n"
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %d)\n"
                "INSERT INTO rows (body) SELECT randomblob(1000) FROM n;\n" % (megabytes * 1000))
    result = {"label": label, "fstype": floors.fs_type(scratch), "megabytes": megabytes}
    server = None
    try:
        server = processes.Server(bench.LARDER, os.path.join(scratch, "root"), fixtures, *processes.UNLIMITED, *extra,
                                  tail=20, ready_timeout=120)
        _, health = server.call("GET", "/health")[:2]
        result["shares_blocks"] = health.get("storage", {}).get("shares_blocks")
        result["health_ms"] = median([timed_ms(lambda: server.call("GET", "/health"))[0] for _ in range(50)])
        build_ms, first = timed_ms(lambda: post(server, "/stores", TEMPLATE))
        result["build_ms"] = build_ms
        result["size_mb"] = os.path.getsize(first["path"]) / 1e6
        server.call("DELETE", "/stores/" + first["id"])
        os.sync()
        settle(server)
        m = floors.metrics(server)
        result["ready_copies"], result["ready_copy_bytes"] = m.get("larder_ready_copies"), m.get("larder_ready_copy_bytes")
        before_ready = used(scratch)

        # Hand-outs: the first finds a ready copy; ten, the room they take.
        took, stores = [], []
        for _ in range(10):
            ms, store = timed_ms(lambda: post(server, "/stores", TEMPLATE))
            took.append(ms)
            stores.append(store)
        result["handout_first_ms"], result["handout_p50_ms"] = took[0], median(took)
        forks, fork_ms = [], []
        for _ in range(5):
            ms, fork = timed_ms(lambda: post(server, "/stores", {"from": stores[0]["id"]}))
            fork_ms.append(ms)
            forks.append(fork)
        result["fork_p50_ms"] = median(fork_ms)
        os.sync()
        result["room_10_handouts_5_forks_mb"] = (used(scratch) - before_ready) / 1e6
        db = sqlite3.connect(stores[1]["path"], isolation_level=None)
        db.execute("UPDATE rows SET body = randomblob(1000) WHERE id <= 100")
        db.close()
        result["fork_after_write_ms"], fork = timed_ms(lambda: post(server, "/stores", {"from": stores[1]["id"]}))
        forks.append(fork)
        reset_ms = [timed_ms(lambda: post(server, "/stores/%s/reset" % stores[1]["id"]))[0] for _ in range(3)]
        result["reset_p50_ms"] = median(reset_ms)
        for store in stores + forks:
            server.call("DELETE", "/stores/" + store["id"])
        # The floors copy the cache entry, the file every hand-out copies.
        source = next(os.path.join(folder, name) for folder, _, names in os.walk(os.path.join(scratch, "root", "cache"))
                      for name in names if name.endswith(".sqlite"))
        server.stop()
        server = None

        # No ready copy: every hand-out copies now (the same root, its cache entry kept).
        server = processes.Server(bench.LARDER, os.path.join(scratch, "root"), fixtures, *processes.UNLIMITED, *extra,
                                  "--ready-copies", "0", tail=20, ready_timeout=120)
        misses = []
        for _ in range(3):
            ms, store = timed_ms(lambda: post(server, "/stores", TEMPLATE))
            misses.append(ms)
            server.call("DELETE", "/stores/" + store["id"])
            os.sync()
        result["handout_no_ready_copy_p50_ms"] = median(misses)
        server.stop()
        server = None

        # Floors: cp of the same file, whole and, where it can, sharing blocks.
        target = os.path.join(scratch, "floor-copy")
        floors_ms = {}
        for name, flag in (("cp_whole_ms", "--reflink=never"), ("cp_reflink_ms", "--reflink=always")):
            runs, synced = [], []
            for _ in range(3):
                began = time.perf_counter()
                done = subprocess.run(["cp", flag, source, target], capture_output=True)
                runs.append((time.perf_counter() - began) * 1e3)
                if done.returncode == 0:
                    fd = os.open(target, os.O_RDONLY)
                    os.fsync(fd)
                    os.close(fd)
                    synced.append((time.perf_counter() - began) * 1e3)
                if os.path.exists(target):
                    os.remove(target)
                os.sync()
                if done.returncode != 0:
                    runs = synced = []
                    break
            floors_ms[name], floors_ms[name.replace("_ms", "_synced_ms")] = median(runs), median(synced)
        result.update(floors_ms)
        result["durable_write_ms"] = durable_write_ms(scratch)
    finally:
        if server:
            server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return result


def figure(ms):
    return "—" if ms is None else floors.figure(ms, "ms")


def table(results):
    lines = ["", "### A %d MB template: hand-outs, forks and resets against cp" % results[0]["megabytes"], "",
             "| | " + " | ".join("%s (%s)" % (r["label"], r["fstype"]) for r in results) + " |",
             "|---|" + "---|" * len(results)]

    def row(name, key, show=figure):
        lines.append("| %s | %s |" % (name, " | ".join(show(r.get(key)) for r in results)))
    row("copies share blocks (`GET /health`)", "shares_blocks", lambda v: {True: "yes", False: "no", None: "—"}[v])
    row("GET /health p50 (this Python client's own round trip, in every row below)", "health_ms")
    row("template built (first POST /stores)", "build_ms")
    row("ready copies made (count)", "ready_copies", lambda v: "—" if v is None else "%d" % v)
    row("hand-out, a ready copy at hand", "handout_first_ms")
    row("hand-out p50 of 10 in a row", "handout_p50_ms")
    row("hand-out, no ready copy (--ready-copies 0) p50", "handout_no_ready_copy_p50_ms")
    row("  ↳ floor: cp --reflink=never", "cp_whole_ms")
    row("  ↳ floor: cp --reflink=never, then fsync", "cp_whole_synced_ms")
    row("  ↳ floor: cp --reflink=always", "cp_reflink_ms")
    row("  ↳ floor: cp --reflink=always, then fsync", "cp_reflink_synced_ms")
    row("  ↳ floor: a small file written, fsynced, renamed, its folder fsynced", "durable_write_ms")
    row("fork of an unchanged store p50 of 5", "fork_p50_ms")
    row("fork just after its test wrote", "fork_after_write_ms")
    row("reset, no connection open, p50 of 3", "reset_p50_ms")
    row("room taken by 10 hand-outs and 5 forks", "room_10_handouts_5_forks_mb", lambda v: "—" if v is None else "%.0f MB" % v)
    row("room the ready copies are counted as", "ready_copy_bytes", lambda v: "—" if v is None else "%.0f MB" % (v / 1e6))
    for r in results:
        if r.get("skipped"):
            lines.append("Note: %s: %s." % (r["label"], r["skipped"]))
    return "\n".join(lines)


def run(bench, megabytes, parents):
    """The rows on each (label, folder) of `parents`, and on an XFS image
    made in the first folder; printed, and answered."""
    results = []
    for label, parent in parents:
        results.append(measure(bench, parent, label, megabytes))
    mount, remove = xfs_image(parents[0][1], max(4, 5 * megabytes // 1000 + 2))
    if mount is None:
        results.append({"label": "XFS", "fstype": "xfs", "megabytes": megabytes, "skipped": remove})
    else:
        try:
            results.append(measure(bench, mount, "XFS image, reflink=1", megabytes))
            results.append(measure(bench, mount, "the same, --sync off", megabytes, "--sync", "off"))
        finally:
            remove()
    print(table(results), flush=True)
    return results


if __name__ == "__main__":
    raise SystemExit("run it through bench/run --large")
