"""What the Python scripts of this repository share to run the server (the
black-box tests under Tests/, the deploy and package tests, bench/): a free
loopback port, the server started on port 0 and its listening line read
within a time limit, its output drained, and stopping it as a supervisor
would (SIGTERM, then SIGKILL); waiting on a condition up to a deadline,
scratch folders and roots, and a process's memory and descriptors. HTTP to
the server is calls.py's.

    sys.path.insert(0, os.path.join(REPO, "Tests", "support"))
    from processes import Server
    server = Server(binary, root, fixtures, "--token", "t")
    ... server.base, server.port, server.call("GET", "/health") ...
    server.stop()
"""
import collections
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import calls

LISTENING = re.compile(rb"^larder listening on (http://\S+)")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "fixtures")
RELEASE = os.path.join(REPO, ".build", "release", "larder")
# A Python that `nobody` may run (pyenv's lives under /root, which it cannot enter).
SYSTEM_PYTHON = next((p for p in ["/usr/bin/python3", "/usr/local/bin/python3"] if os.path.exists(p)), None)
# For load: no cap on the number of stores and no expiry, so every store is the load's own to delete.
UNLIMITED = ("--max-stores", "1000000", "--ttl-seconds", "86400")


def larder_binary():
    """The binary a test script was given as its first argument, else this checkout's debug build."""
    return os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, ".build", "debug", "larder"))


def run_tests(name):
    """Runs the tests of the script being run, verbosely; prints "NAME: P
    passed, F failed, S skipped" and exits 1 when one failed."""
    result = unittest.main(module="__main__", argv=[sys.argv[0], "-v"], exit=False).result
    failed, skipped = len(result.failures) + len(result.errors), len(result.skipped)
    print("%s: %d passed, %d failed, %d skipped" % (name, result.testsRun - failed - skipped, failed, skipped))
    sys.exit(1 if failed else 0)


def readable_log(log):
    """A log's text as written and as its JSON lines read (a JSON string may escape "/" and "+")."""
    parsed = []
    for line in log.splitlines():
        try:
            parsed.append(json.dumps(json.loads(line), ensure_ascii=False))
        except ValueError:
            pass
    return log + "\n" + "\n".join(parsed)


def clean_environment(**extra):
    """This process's environment without LARDER_ settings (a test names its own), plus `extra`."""
    return dict({k: v for k, v in os.environ.items() if not k.startswith("LARDER_")}, **extra)


def wait_until(check, seconds=10, interval=0.05):
    """check()'s first true answer within `seconds`, asked every `interval`;
    past the deadline, its last answer (false)."""
    deadline = time.monotonic() + seconds
    while True:
        answer = check()
        if answer or time.monotonic() >= deadline:
            return answer
        time.sleep(interval)


def tmpfs_path(name):
    """/dev/shm/NAME where there is a /dev/shm, else /tmp/NAME: stores are
    file system work, and on tmpfs the disk is left out of what is measured."""
    return os.path.join("/dev/shm" if os.path.isdir("/dev/shm") else "/tmp", name)


def fresh_root(prefix):
    """A path in the temporary directory that does not exist yet: the server makes its root with its own modes."""
    root = tempfile.mkdtemp(prefix=prefix)
    os.rmdir(root)
    return root


def scratch_folder(test, prefix, mode=None, **options):
    """A new temporary folder, removed when `test` (a unittest.TestCase) is cleaned up."""
    folder = tempfile.mkdtemp(prefix=prefix, **options)
    test.addCleanup(shutil.rmtree, folder, True)
    if mode is not None:
        os.chmod(folder, mode)
    return folder


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def open_descriptors(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


class Peak:
    """Samples a process's RSS in the background from now on; `stop()`
    answers its peak growth in MiB."""

    def __init__(self, pid, interval=0.005):
        self.pid, self.interval = pid, interval
        self.before = self.peak = rss_kib(pid)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self):
        while not self.done.wait(self.interval):
            self.peak = max(self.peak, rss_kib(self.pid))

    def stop(self):
        self.done.set()
        self.thread.join()
        return (self.peak - self.before) / 1024


def half_made(root):
    """What ROOT/building holds besides its empty shards 0 to 127, where
    stores are made (RootLayout.halfMade): [] when no store is being made."""
    building, found = os.path.join(root, "building"), []
    for name in sorted(os.listdir(building)):
        path = os.path.join(building, name)
        if name.isdigit() and str(int(name)) == name and int(name) < 128 and os.path.isdir(path) and not os.path.islink(path):
            found += [name + "/" + inner for inner in sorted(os.listdir(path))]
        else:
            found.append(name)
    return found


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(process, grace=15):
    """SIGTERM, up to `grace` seconds to finish, then SIGKILL; closes its
    stdout pipe. Answers the exit status (None when it had to be killed)."""
    code = process.poll()
    if code is None:
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            code = None
    if process.stdout:
        process.stdout.close()
    return code


def first_line(process, timeout=60):
    """The first line `process` prints on its stdout pipe (bytes, text or
    binary pipe alike), waited for up to `timeout` seconds."""
    fd, buffer, deadline = process.stdout.fileno(), b"", time.monotonic() + timeout
    while b"\n" not in buffer and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            chunk = os.read(fd, 1)  # byte by byte: nothing past the line is taken from the pipe
            if not chunk:
                break
            buffer += chunk
    return buffer.split(b"\n", 1)[0]


def listening(process, what="the server", timeout=60):
    """The base URL of a starting `larder serve` (its first line, "larder
    listening on URL"); kills it and raises RuntimeError saying what it
    printed when it does not start."""
    line = first_line(process, timeout)
    match = LISTENING.match(line)
    if not match:
        process.kill()
        process.wait(timeout=10)
        rest = process.stdout.read() if process.stdout else b""
        if process.stdout:
            process.stdout.close()
        raise RuntimeError("%s did not start: %r %s" % (what, line, rest if isinstance(rest, str) else rest.decode("utf-8", "replace")))
    return match.group(1).decode()


class Server:
    """`larder serve --port 0 --root ROOT --fixtures FIXTURES EXTRA...` as a
    subprocess. Its stderr (the log) goes to a file, read with `log_text()`,
    or with `tail=N` is drained by a thread that keeps the last N lines
    (long soaks: nothing on disk); stdout is drained after the listening
    line so a full pipe never stalls it."""

    def __init__(self, binary, root, fixtures, *extra, env=None, tail=None, ready_timeout=60):
        started = time.monotonic()
        self.log_path = None
        if tail is None:
            log = tempfile.NamedTemporaryFile(prefix="larder-log-", suffix=".txt", delete=False)
            self.log_path, stderr = log.name, log
        else:
            stderr = subprocess.PIPE
        self.stderr_tail = collections.deque(maxlen=tail or 1)
        self.stderr_lines = 0
        self.process = subprocess.Popen([binary, "serve", "--port", "0", "--root", root, "--fixtures", fixtures, *extra],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, env=env)
        if tail is None:
            stderr.close()
        else:
            threading.Thread(target=self._drain_stderr, daemon=True).start()
        self.pid = self.process.pid
        try:
            self.base = listening(self.process, "larder", ready_timeout)
        except RuntimeError as error:
            raise RuntimeError("%s; log: %s" % (error, self.log_text()[-2000:])) from None
        self.port = int(self.base.rsplit(":", 1)[1].rstrip("/"))
        self.address = self.base.split("//", 1)[1].rstrip("/")
        self.startup_seconds = time.monotonic() - started
        threading.Thread(target=self._drain_stdout, daemon=True).start()

    def _drain_stdout(self):
        try:
            while self.process.stdout.read(65536):
                pass
        except (OSError, ValueError):
            pass

    def _drain_stderr(self):
        for line in self.process.stderr:
            self.stderr_lines += 1
            self.stderr_tail.append(line.decode("utf-8", "replace").rstrip())

    def log_text(self):
        if self.log_path is None:
            return "\n".join(self.stderr_tail)
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def call(self, method, path, body=None, content_type="application/json", **options):
        """One request to this server: calls.call's (status, body, headers)."""
        return calls.call(self.base, method, path, body, content_type, **options)

    def metric(self, name, token=None):
        return calls.metric(self.base, name, token)

    def alive(self):
        return self.process.poll() is None

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """`sig`, then the exit status (None when it had to be killed); the log file goes."""
        if self.alive():
            self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
            code = None
        if self.process.stdout:
            self.process.stdout.close()
        undeclared = []
        if self.log_path:
            # Every answer kept to its route's declared statuses (the router logs any other).
            try:
                undeclared = [line for line in self.log_text().splitlines() if "the contract does not declare" in line]
            except OSError:
                pass
            try:
                os.unlink(self.log_path)
            except OSError:
                pass
        if undeclared:
            raise AssertionError("answers the OpenAPI document does not declare:\n" + "\n".join(undeclared))
        return code
