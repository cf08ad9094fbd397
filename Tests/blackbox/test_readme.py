#!/usr/bin/env python3
"""The tour's curl block (docs/tour.md, "Try it"; the README's "Using it"
until issue 45 moved it), run as a user pastes it: top to bottom in bash,
against `larder serve` on this repository's fixtures (issue 30: every
example must copy-paste).

    python3 Tests/blackbox/test_readme.py .build/debug/larder

The block runs as written; only `localhost:7464` becomes the test server's
address. Its working directory is a temporary stand-in for the checkout
(`fixtures` and `.build/{debug,release}/larder` are links to the real ones),
so whatever the block writes relative to the checkout is seen, and the real
checkout is left alone. `bash -e -o pipefail` stops at the first command that
fails, and an ERR trap names its line. `curl` without -f exits 0 on an HTTP
error, so `curl` on the block's PATH is a wrapper that runs the real one,
records each answer's status and body, and exits 22 (curl's -f code) on a
4xx or 5xx the page does not mean (ALLOWED).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import xml.etree.ElementTree as ElementTree
import zipfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from processes import Server  # noqa: E402  (the one harness of the repository's Python scripts)

BINARY = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".build/debug/larder")
REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
FIXTURES = os.path.join(REPO, "fixtures")
PAGE = os.path.join("docs", "tour.md")
TOUR = os.path.join(REPO, PAGE)
HEADING = "## Try it"
ADDRESS = "localhost:7464"

# Error statuses the page means, by a part of the URL: the long poll waits
# for albums>=3 on a store that has 2, so after timeout_ms it answers 408
# with the last counts, as its comment says.
ALLOWED = [("/counts?wait=", [408])]

# Runs the real curl with a -w of its own, strips that from the output,
# appends {"args", "url", "status", "exit", "body"} to the log, and exits 22
# on an HTTP error not in ALLOWED.
CURL_WRAPPER = r'''#!%(python)s
import json, os, subprocess, sys
MARK = b"\n@@larder-readme-status@@"
args = sys.argv[1:]
done = subprocess.run([os.environ["LARDER_README_CURL"], *args, "-w", MARK.decode() + "%%{http_code}"],
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
body, mark, status = done.stdout.rpartition(MARK)
if not mark:
    body, status = done.stdout, b"0"
sys.stdout.buffer.write(body)
sys.stdout.flush()
sys.stderr.buffer.write(done.stderr)
address = os.environ["LARDER_README_ADDRESS"]
url = next((a for a in args if address in a), "")
status = int(status or 0)
with open(os.environ["LARDER_README_CALLS"], "a") as log:
    log.write(json.dumps({"args": args, "url": url, "status": status, "exit": done.returncode,
                          "body": body[:1000000].decode("utf-8", "replace")}) + "\n")
if done.returncode:
    sys.exit(done.returncode)
allowed = any(part in url and status in statuses for part, statuses in json.loads(os.environ["LARDER_README_ALLOWED"]))
if status >= 400 and not allowed:
    sys.stderr.write("curl: HTTP %%d from %%s: %%s\n" %% (status, url, body[:300].decode("utf-8", "replace")))
    sys.exit(22)
'''

# One line before the block: the trap that names the failing line.
PRELUDE = 'trap \'echo "$LINENO" > "$LARDER_README_FAILED"\' ERR\n'


def using_it(text):
    """The fenced sh block under HEADING: (its first line's number in the page, its text)."""
    lines = text.split("\n")
    start = lines.index(HEADING)
    opening = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("```"))
    if lines[opening].strip() != "```sh" or any(line.startswith("#") for line in lines[start + 1:opening]):
        raise AssertionError("no ```sh block right under %r" % HEADING)
    closing = next(i for i in range(opening + 1, len(lines)) if lines[i].startswith("```"))
    return opening + 2, "\n".join(lines[opening + 1:closing]) + "\n"


def commands(block, first_line):
    """The block's commands as (first line, last line in the page, text):
    lines ending in a backslash or a pipe go on; comments and blank lines
    between commands are none."""
    found, current = [], None
    for number, line in enumerate(block.split("\n"), first_line):
        stripped = line.strip()
        if current is None:
            if not stripped or stripped.startswith("#"):
                continue
            current = [number, number, line]
        else:
            current[1], current[2] = number, current[2] + "\n" + line
        if not (stripped.endswith("\\") or stripped.endswith("|")):
            found.append(tuple(current))
            current = None
    if current:
        found.append(tuple(current))
    return found


class Run:
    """What one run of a block did: its exit status, output, the curl calls
    and, when it stopped at a failure, the command it stopped at."""

    def __init__(self, returncode, stdout, stderr, calls, failed):
        self.returncode, self.stdout, self.stderr, self.calls, self.failed = returncode, stdout, stderr, calls, failed

    def describe(self):
        where = "%s:%d: %s" % (PAGE, self.failed[0], self.failed[2]) if self.failed else "no failing line named"
        return "block exited %d at %s\n--- stderr (end) ---\n%s" % (self.returncode, where, self.stderr[-3000:])


def run_block(block, first_line, server, area):
    """Runs `block` in bash in a stand-in checkout under `area` (a fresh
    directory); answers a Run."""
    work, tools, tmp = (os.path.join(area, name) for name in ("checkout", "bin", "tmp"))
    for folder in (work, tools, tmp):
        os.makedirs(folder)
    os.symlink(FIXTURES, os.path.join(work, "fixtures"))
    for kind in ("debug", "release"):
        os.makedirs(os.path.join(work, ".build", kind))
        os.symlink(BINARY, os.path.join(work, ".build", kind, "larder"))
    os.symlink(BINARY, os.path.join(tools, "larder"))
    real_curl = shutil.which("curl")
    if real_curl is None:
        raise unittest.SkipTest("no curl on PATH")
    wrapper = os.path.join(tools, "curl")
    with open(wrapper, "w") as f:
        f.write(CURL_WRAPPER % {"python": sys.executable})
    os.chmod(wrapper, 0o755)
    calls_path, failed_path, script = (os.path.join(area, name) for name in ("calls.jsonl", "failed-line", "block.sh"))
    with open(script, "w") as f:
        f.write(PRELUDE + block.replace(ADDRESS, server.address))
    env = dict(os.environ, PATH=tools + os.pathsep + os.environ.get("PATH", ""), TMPDIR=tmp,
               LARDER_README_CURL=real_curl, LARDER_README_ADDRESS=server.address, LARDER_README_CALLS=calls_path,
               LARDER_README_FAILED=failed_path, LARDER_README_ALLOWED=json.dumps(ALLOWED))
    for name in ("LARDER_URL", "LARDER_TOKEN", "LARDER_FIXTURES", "LARDER_ROOT"):
        env.pop(name, None)
    done = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", script], cwd=work, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    calls = []
    if os.path.exists(calls_path):
        with open(calls_path) as f:
            calls = [json.loads(line) for line in f]
    failed = None
    if os.path.exists(failed_path):
        with open(failed_path) as f:
            line = first_line + int(f.read().strip()) - 1 - PRELUDE.count("\n")
        listed = commands(block, first_line)
        failed = next((c for c in listed if c[0] <= line <= c[1]), None) \
            or next((c for c in reversed(listed) if c[0] <= line), (line, line, "?"))
    return Run(done.returncode, done.stdout, done.stderr, calls, failed)


def untracked():
    """The checkout's untracked files (not ignored), or None outside git."""
    try:
        done = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=all"],
                              capture_output=True, text=True, timeout=60)
    except OSError:
        return None
    if done.returncode:
        return None
    return {line[3:] for line in done.stdout.splitlines() if line.startswith("?? ")}


def files_under(folder):
    return [os.path.join(top, name) for top, _, names in os.walk(folder) for name in names]


class ReadmeTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="larder-readme-")
        shutil.rmtree(cls.root)
        cls.server = Server(BINARY, cls.root, FIXTURES)
        with open(TOUR) as f:
            cls.first_line, cls.block = using_it(f.read())

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.root, ignore_errors=True)

    def setUp(self):
        self.area = tempfile.mkdtemp(prefix="larder-readme-run-")

    def tearDown(self):
        shutil.rmtree(self.area, ignore_errors=True)

    def test_block_runs_as_written(self):
        self.assertIn(ADDRESS, self.block)
        before, started = untracked(), time.time()
        run = run_block(self.block, self.first_line, self.server, self.area)
        self.assertEqual(run.returncode, 0, run.describe())
        self.assertIsNone(run.failed, run.describe())

        # Every answer was a success but the ones the page means; every store URL has a real id.
        self.assertTrue(run.calls)
        for call in run.calls:
            if call["status"] >= 400:
                self.assertTrue(any(part in call["url"] and call["status"] in statuses for part, statuses in ALLOWED), call)
            if "/stores/" in call["url"]:
                self.assertRegex(call["url"], r"/stores/st_[0-9a-f]+($|[/?])", "a store URL without an id")
        waits = [call for call in run.calls if "/counts?wait=" in call["url"]]
        self.assertTrue(waits and all(call["status"] in (200, 408) for call in waits), waits)

        # The diff shows what the block did: the album it inserted, the migration's schema changes.
        [diff] = [json.loads(call["body"]) for call in run.calls if "/diff" in call["url"]]
        inserted = [row["new"]["title"] for row in diff["tables"]["albums"]["rows"] if row["op"] == "insert"]
        self.assertIn("Summer", inserted, diff)
        self.assertTrue(diff["schema"]["added"], "the migration 3 -> 6 added tables and columns")

        # Downloads and reports went to a temporary folder ($TMPDIR), not into the checkout.
        written = files_under(os.path.join(self.area, "tmp"))
        [artifact] = [path for path in written if path.endswith(".zip")]
        with zipfile.ZipFile(artifact) as z:
            self.assertLessEqual({"store.sqlite", "manifest.json", "diff.json"}, set(z.namelist()))
            self.assertIsNone(z.testzip())
            saved = json.loads(z.read("diff.json"))
        self.assertIn("Summer", [row["new"]["title"] for row in saved["tables"]["albums"]["rows"] if row["op"] == "insert"])
        [database] = [path for path in written if path.endswith(".sqlite")]
        with open(database, "rb") as f:
            self.assertEqual(f.read(16), b"SQLite format 3\0")
        reports = [path for path in written if path.endswith(".xml")]
        self.assertGreaterEqual(len(reports), 2, "the server's JUnit report and larder check's: %s" % written)
        for report in reports:
            suites = ElementTree.parse(report).getroot()
            self.assertEqual((suites.tag, suites.get("failures")), ("testsuites", "0"), report)
            self.assertGreater(int(suites.get("tests")), 0, report)

        # Every `larder check` line ran (through .build/.../larder or larder on PATH) and passed.
        checks = [c for c in commands(self.block, self.first_line) if re.search(r"larder\S*\s+check\b", c[2], re.I)]
        self.assertTrue(checks)
        self.assertEqual(len(re.findall(r"^\d+ passed, 0 failed$", run.stdout, re.M)), len(checks), run.stdout)

        # The stand-in checkout holds only what the test put there, and the real one has no new files.
        self.assertEqual(sorted(os.listdir(os.path.join(self.area, "checkout"))), [".build", "fixtures"])
        self.assertEqual(sorted(files_under(os.path.join(self.area, "checkout", ".build"))),
                         sorted(os.path.join(self.area, "checkout", ".build", kind, "larder") for kind in ("debug", "release")))
        after = untracked()
        if before is not None and after is not None:
            made = lambda path: os.path.lexists(path) and os.lstat(path).st_mtime >= started - 1  # noqa: E731
            new = [path for path in after - before if made(os.path.join(REPO, path))]
            self.assertEqual(new, [], "the block wrote into the checkout")

    def test_a_failing_line_is_reported(self):
        """A broken copy of the block (never the page) stops at the broken
        line, and the harness names it: HTTP errors curl itself ignores, one
        of them inside the command substitution that sets ID (a file name
        that does not exist: curl -s sends an empty body)."""
        listed = commands(self.block, self.first_line)
        cases = [("/migrate ", "/migrat ", "HTTP 404"), ("v3.sqlite", "v3.sqlit", "HTTP 400")]
        for old, new, said in cases:
            with self.subTest(broken=new):
                [target] = [c for c in listed if old in c[2]]
                lines = self.block.split("\n")
                for index in range(target[0] - self.first_line, target[1] - self.first_line + 1):
                    lines[index] = lines[index].replace(old, new)
                area = os.path.join(self.area, new.strip("/ ").replace(".", "-"))
                run = run_block("\n".join(lines), self.first_line, self.server, area)
                self.assertNotEqual(run.returncode, 0, run.describe())
                self.assertIsNotNone(run.failed, run.describe())
                self.assertEqual(run.failed[0], target[0], run.describe())
                self.assertIn(new, run.failed[2])
                self.assertIn(said, run.stderr)
                # Nothing after it ran: the broken curl was the last of the calls, one per curl line up to it.
                self.assertTrue(any(new.strip() in arg for arg in run.calls[-1]["args"]), run.calls[-1])
                self.assertEqual(len(run.calls), len([c for c in listed if c[0] <= target[0] and re.search(r"\bcurl\b", c[2])]))
                print("  reported: %s" % run.describe().split("\n", 1)[0], file=sys.stderr)


if __name__ == "__main__":
    result = unittest.main(argv=[sys.argv[0], "-v"], exit=False).result
    failed = len(result.failures) + len(result.errors)
    print("readme: %d passed, %d failed, %d skipped" % (result.testsRun - failed - len(result.skipped), failed, len(result.skipped)))
    sys.exit(1 if failed else 0)
