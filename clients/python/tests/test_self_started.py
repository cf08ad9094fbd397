"""The server the plugin starts itself when no URL is given (clients/README.md,
"Where a test helper's server comes from"), as a user meets it: pytest runs
a small project in a subprocess (the sample suite, its own `fixtures/`
holding the repository's gallery template), with LARDER_URL unset and
LARDER_BINARY naming the binary under test, and a TMPDIR of its own so
that what `larder up` leaves there can be looked at.
"""
import json
import os
import re
import shutil
import sqlite3
import stat
import subprocess
import sys
import time
import zipfile

import pytest

import larder
from larder import _up
from larder._client import RUN_VARIABLES

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE = os.path.join(HERE, "sample")
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
# The variables a run prefix comes from, not inherited (a CI system running these tests sets some).
RUN_ENVIRONMENT = {name for pair in RUN_VARIABLES for name in pair if name}

# Tests that take a while, so that both xdist workers get some of them.
WORKER_TESTS = '''
import time

import pytest


@pytest.mark.parametrize("n", range(4))
def test_shares_the_server(larder_store, record, n):
    record(larder_store, "worker-%d" % n)
    time.sleep(0.3)
'''

NO_STORE_TESTS = '''
def test_needs_no_store():
    assert True
'''

# A `larder` that says why it cannot start a server, and notes that it was run.
CANARY = '''#!/bin/sh
echo "$*" >> "%s"
echo "canary larder: no server today" >&2
exit 2
'''


def binary():
    return os.environ["LARDER_BINARY"]


def make_project(work, tests=("test_gallery.py", "test_default.py", "conftest.py"), extra=None):
    """A project in work/project: the sample's files `tests`, more files
    from `extra` ({name: text}) and fixtures/gallery; a TMPDIR of its own in work/tmp."""
    project = work / "project"
    project.mkdir()
    for name in tests:
        shutil.copy(os.path.join(SAMPLE, name), str(project / name))
    for name, text in (extra or {}).items():
        (project / name).write_text(text)
    shutil.copytree(os.path.join(REPO, "fixtures", "gallery"), str(project / "fixtures" / "gallery"))
    (work / "tmp").mkdir()
    (work / "records").mkdir()
    return project


def run_project(work, *args, env=None):
    """pytest in work/project; (exit code, output, records, seconds from its start to each record)."""
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("LARDER_", "PYTEST_")) and k not in ("PYTHONPATH", "TMPDIR")
                   and k not in RUN_ENVIRONMENT}
    environment.update({"SAMPLE_RECORDS": str(work / "records"), "TMPDIR": str(work / "tmp")})
    environment.update(env or {})
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(work / "project"), *args]
    started = time.time()
    result = subprocess.run(command, cwd=str(work / "project"), env=environment, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, timeout=180)
    output = result.stdout.decode("utf-8", "replace")
    records = {path.name[:-5]: json.loads(path.read_text()) for path in (work / "records").glob("*.json")}
    return result.returncode, output, records, started


def running(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A process that has exited but is not reaped yet is no server any more.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def processes_mentioning(text):
    """Pids of the processes whose command line holds `text` (Linux's /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/cmdline" % entry, "rb") as f:
                    if text.encode() in f.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


def server_folders(tmp):
    """The `larder up` servers' folders under a TMPDIR: larder-UID/KEY."""
    return sorted(str(path) for path in tmp.glob("larder-*/*"))


def assert_gone_soon(work, server_pids, seconds=3.0):
    """Within `seconds` of pytest's return, no server it started runs and
    their folders are gone."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = [pid for pid in server_pids if running(pid)] + processes_mentioning(str(work / "tmp"))
        if not left and not server_folders(work / "tmp"):
            return
        time.sleep(0.1)
    pytest.fail("%.0f s after pytest returned, servers %s run and these folders remain: %s"
                % (seconds, left, server_folders(work / "tmp")))


def check_sample_outcome(project, code, output, records, summary="1 failed, 2 passed"):
    """Every test had its store; the failing one's kept, its artifact saved."""
    assert code == 1, output
    assert summary in output, output
    assert {"passes", "fails", "default"} <= set(records), output
    assert records["passes"]["label"] == "test_gallery.py/test_passes"
    assert records["passes"]["counts"]["artists"] == 4
    assert records["default"]["template"] == "gallery"
    failed_id = records["fails"]["id"]
    artifact = project / "larder-artifacts" / ("test_gallery.py_test_fails-%s.zip" % failed_id)
    assert "store %s kept; artifact: %s" % (failed_id, artifact) in output, output
    with zipfile.ZipFile(str(artifact)) as archive:
        archive.extract("store.sqlite", str(project))
    db = sqlite3.connect(str(project / "store.sqlite"))
    try:
        assert db.execute("SELECT year FROM artworks WHERE title = 'Abaporu'").fetchone() == (1928,)
    finally:
        db.close()


def one_server(records):
    """The one server every record names: (url, pid)."""
    servers = {(r["recorded"]["url"], r["recorded"]["server_pid"]) for r in records.values()}
    assert len(servers) == 1, servers
    url, pid = servers.pop()
    assert url.startswith("http://127.0.0.1:") and isinstance(pid, int), (url, pid)
    return url, pid


def test_the_plugin_starts_the_server_and_it_goes_when_pytest_has(tmp_path, capsys):
    project = make_project(tmp_path)
    code, output, records, started = run_project(tmp_path, "--larder-template", "gallery",
                                                 env={"LARDER_BINARY": binary()})
    check_sample_outcome(project, code, output, records)
    url, pid = one_server(records)
    assert {r["recorded"]["pid"] for r in records.values()} != {os.getpid()}
    # The fixtures folder was found by `larder up` from the project's directory.
    assert records["passes"]["template"] == "gallery"
    assert_gone_soon(tmp_path, [pid])
    first = min(r["recorded"]["at"] for r in records.values()) - started
    with capsys.disabled():
        sys.stderr.write("\n[larder] pytest start to its first store, the server self-started: %.2f s\n" % first)


def test_xdist_workers_share_one_server(tmp_path):
    pytest.importorskip("xdist", reason="pytest-xdist is not installed")
    project = make_project(tmp_path, extra={"test_workers.py": WORKER_TESTS})
    code, output, records, _ = run_project(tmp_path, "-p", "xdist", "-n", "2", "--larder-template", "gallery",
                                           env={"LARDER_BINARY": binary()})
    assert "2 workers" in output, output
    check_sample_outcome(project, code, output, records, summary="1 failed, 6 passed")
    assert len(records) == 7, records
    # Both workers had stores, all from one server.
    assert {r["recorded"]["worker"] for r in records.values()} == {"gw0", "gw1"}, records
    assert len({r["recorded"]["pid"] for r in records.values()}) == 2
    _, pid = one_server(records)
    assert_gone_soon(tmp_path, [pid])


def test_fixtures_and_binary_as_options(tmp_path):
    """--larder-binary and --larder-fixtures (a folder that is not found by itself)."""
    project = make_project(tmp_path)
    shutil.move(str(project / "fixtures"), str(project / "elsewhere"))
    code, output, records, _ = run_project(tmp_path, "--larder-template", "gallery", "--larder-binary", binary(),
                                           "--larder-fixtures", "elsewhere")
    check_sample_outcome(project, code, output, records)
    _, pid = one_server(records)
    assert_gone_soon(tmp_path, [pid])


def write_canary(work):
    canary = work / "canary-larder"
    canary.write_text(CANARY % (work / "canary-ran"))
    canary.chmod(canary.stat().st_mode | stat.S_IEXEC)
    return canary


@pytest.mark.parametrize("how", ["option", "environment"])
def test_a_url_wins_and_starts_nothing(server, tmp_path, how):
    make_project(tmp_path)
    canary = write_canary(tmp_path)
    env = {"LARDER_BINARY": str(canary)}
    args = ["--larder-template", "gallery"]
    if how == "option":
        args += ["--larder-url", server.url]
    else:
        env["LARDER_URL"] = server.url
    code, output, records, _ = run_project(tmp_path, *args, env=env)
    assert code == 1 and "1 failed, 2 passed" in output, output
    assert {r["recorded"]["url"] for r in records.values()} == {server.url}
    assert not (tmp_path / "canary-ran").exists()
    assert server_folders(tmp_path / "tmp") == []
    with larder.Client(url=server.url) as client:
        client.store(records["fails"]["id"]).delete()


def test_a_run_that_needs_no_store_starts_nothing(tmp_path):
    make_project(tmp_path, tests=(), extra={"test_plain.py": NO_STORE_TESTS})
    canary = write_canary(tmp_path)
    code, output, _, _ = run_project(tmp_path, env={"LARDER_BINARY": str(canary)})
    assert code == 0 and "1 passed" in output, output
    assert not (tmp_path / "canary-ran").exists()
    assert not list((tmp_path / "tmp").iterdir())


def test_a_failing_larder_up_fails_the_tests_with_what_it_said(tmp_path):
    make_project(tmp_path)
    canary = write_canary(tmp_path)
    code, output, records, _ = run_project(tmp_path, "--larder-template", "gallery",
                                           env={"LARDER_BINARY": str(canary)})
    assert code == 1 and "3 errors" in output, output
    assert output.count("canary larder: no server today") >= 3, output
    assert "failed (exit 2)" in output
    assert records == {}
    # Three runs for each test: a failure is not kept for the session, and each call tries three times.
    ran = (tmp_path / "canary-ran").read_text().splitlines()
    assert len(ran) == 9 and all(re.fullmatch(r"up --for \d+", line) for line in ran), ran
    assert len(set(ran)) == 1, ran


# A `larder` that fails its first $FLAKY_FAILS runs and then is the real one.
FLAKY = '''#!/bin/sh
echo "$*" >> "%s"
if [ "$(wc -l < "%s")" -le "$FLAKY_FAILS" ]; then
    echo "flaky larder: not this time" >&2
    exit 2
fi
exec "%s" "$@"
'''

# Tests in order: the first two need the server while `larder up` still
# fails (the second through a session fixture of the project's own); the
# third gets it.
RETRIED_TESTS = '''
import pytest


@pytest.fixture(scope="session")
def url(larder_client):
    return larder_client.url


def test_1_while_up_fails(larder_store):
    pass


def test_2_while_up_fails(url, larder_store):
    pass


def test_3_once_up_answers(url, larder_store, larder_client, record):
    assert url == larder_client.url
    record(larder_store, "third")
'''


def write_flaky(work, real):
    flaky = work / "flaky-larder"
    log = work / "flaky-ran"
    flaky.write_text(FLAKY % (log, log, real))
    flaky.chmod(0o755)
    return flaky, log


def test_the_next_test_runs_a_failed_larder_up_again(tmp_path):
    """A session whose `larder up` failed is not failed for good: each test
    that needs the server runs it again (three times: the first two tests'
    six runs fail), and the first that gets a URL keeps it for the rest."""
    make_project(tmp_path, tests=("conftest.py",), extra={"test_retried.py": RETRIED_TESTS})
    flaky, log = write_flaky(tmp_path, binary())
    code, output, records, _ = run_project(tmp_path, env={"LARDER_BINARY": str(flaky), "FLAKY_FAILS": "6"})
    assert code == 1 and "1 passed, 2 errors" in output, output
    assert output.count("flaky larder: not this time") >= 2, output
    assert set(records) == {"third"}, output
    assert len(log.read_text().splitlines()) == 7
    _, pid = one_server(records)
    assert_gone_soon(tmp_path, [pid])


# The child of the back-to-back runs: one test, one store, its server's URL written down.
ONE_STORE = '''
import os


def test_makes_a_store(larder_store):
    assert larder_store.id
    with open(os.environ["CHILD_RECORD"], "w") as f:
        f.write(larder_store.client.url)
'''

# How long each round waits after the last one's processes ended: its
# `larder up` runs a few tenths of a second later, across the moment the
# server they leave stops (a second after them), so that some rounds join
# it as it stops (issue 43).
ROUND_GAPS = (0.0, 0.5, 0.65, 0.75, 0.85, 0.95, 1.05, 0.0)


def test_back_to_back_runs_while_the_server_stops(tmp_path, capsys):
    """Rounds of two pytest processes at once, each the next right after the
    last: every test gets its store, whether it joins the server running,
    one stopping, or none."""
    project = make_project(tmp_path, tests=(), extra={"test_one.py": ONE_STORE})
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("LARDER_", "PYTEST_")) and k not in ("PYTHONPATH", "TMPDIR")
                   and k not in RUN_ENVIRONMENT}
    environment.update({"LARDER_BINARY": binary(), "TMPDIR": str(tmp_path / "tmp")})
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir", str(project)]
    urls = []
    ended = time.monotonic()
    for round_, gap in enumerate(ROUND_GAPS):
        while time.monotonic() < ended + gap:
            time.sleep(0.01)
        children = []
        for child in range(2):
            record = tmp_path / "records" / ("%d-%d" % (round_, child))
            children.append((record, subprocess.Popen(
                command, cwd=str(project), env=dict(environment, CHILD_RECORD=str(record)),
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)))
        for record, process in children:
            output = process.communicate(timeout=60)[0].decode("utf-8", "replace")
            assert process.returncode == 0 and "1 passed" in output, "round %d: %s" % (round_, output)
            urls.append(record.read_text())
        ended = time.monotonic()
    assert_gone_soon(tmp_path, [])
    with capsys.disabled():
        sys.stderr.write("\n[larder] %d rounds of two pytest processes back to back: %d servers\n"
                         % (len(ROUND_GAPS), len(set(urls))))


def test_no_url_and_no_binary_is_one_sentence(tmp_path):
    if os.path.exists(_up.SHIPPED_BINARY):
        pytest.skip("this installation carries the server: there is always a binary")
    make_project(tmp_path)
    # PATH without a larder: only the Python that runs pytest and the system's.
    path = os.pathsep.join([os.path.dirname(sys.executable), "/usr/bin", "/bin"])
    assert shutil.which("larder", path=path) is None
    code, output, records, _ = run_project(tmp_path, env={"PATH": path})
    assert code == 1 and "3 errors" in output, output
    assert records == {}
    # Under each error, the sentence alone (the summary's lines may be cut to the terminal's width).
    assert output.count("\n" + _up.NO_SERVER + "\n") == 3, output
    assert _up.NO_SERVER == ("Larder: no server to use: set LARDER_URL to a running server's URL, or install "
                             "the larder binary (set LARDER_BINARY to it, or put it on PATH)")
    assert not list((tmp_path / "tmp").iterdir())


# --- outside pytest: Client.for_tests, start_server, find_binary ------------------

FOR_TESTS = '''
import json, os, sys, time
import larder

started = time.monotonic()
client = larder.Client.for_tests(cwd=sys.argv[1])
took = time.monotonic() - started
again = larder.start_server(cwd=sys.argv[1])   # once per process: the same answer, nothing run
with client:
    store = client.create_store(template="gallery", fixtures=["artists"])
    print(json.dumps({"url": client.url, "again": again, "took": took, "counts": store.counts("artists")}))
'''


def test_client_for_tests_outside_pytest(tmp_path, capsys):
    project = make_project(tmp_path, tests=())
    environment = {k: v for k, v in os.environ.items() if not k.startswith("LARDER_") and k != "TMPDIR"}
    environment.update({"LARDER_BINARY": binary(), "TMPDIR": str(tmp_path / "tmp")})
    result = subprocess.run([sys.executable, "-c", FOR_TESTS, str(project)], env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    assert result.returncode == 0, result.stdout.decode()
    answer = json.loads(result.stdout.decode().splitlines()[-1])
    assert answer["url"] == answer["again"]
    assert answer["counts"] == {"artists": 4}
    with capsys.disabled():
        sys.stderr.write("\n[larder] larder up, the server started: %.3f s\n" % answer["took"])
    assert_gone_soon(tmp_path, [])

    # With LARDER_URL set, that URL, and nothing is run.
    environment.update({"LARDER_URL": "http://127.0.0.1:9", "LARDER_BINARY": str(write_canary(tmp_path))})
    result = subprocess.run([sys.executable, "-c", "import larder; print(larder.Client.for_tests().url)"],
                            env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    assert result.stdout.decode().strip() == "http://127.0.0.1:9", result.stdout.decode()
    assert not (tmp_path / "canary-ran").exists()


def test_start_server_passes_settings_and_reports_failures(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    with pytest.raises(larder.LarderError) as caught:
        larder.start_server(binary=binary(), cwd=str(tmp_path), settings=["--no-such-setting", "1"])
    assert (caught.value.status, caught.value.code) == (0, "no_server")
    assert "no-such-setting" in caught.value.message
    assert caught.value.message.startswith("Larder: `%s up --for %d " % (binary(), os.getpid()))


# A `larder up` that logs its runs and fails its first $FAILS runs (its
# stderr saying which), then answers $ANSWER (a URL) and exits 0.
SCRIPTED = '''#!/bin/sh
echo "$*" >> "$0.ran"
runs=$(wc -l < "$0.ran")
if [ "$runs" -le "${FAILS:-0}" ]; then
    echo "scripted larder: failure $runs" >&2
    exit 2
fi
echo "$ANSWER"
'''


def scripted(tmp_path, monkeypatch, name, fails, answer="http://127.0.0.1:9"):
    """A scripted larder, and the pauses start_server takes between its runs (recorded, not taken)."""
    path = tmp_path / name
    executable(path, SCRIPTED)
    monkeypatch.setenv("FAILS", str(fails))
    monkeypatch.setenv("ANSWER", answer)
    pauses = []
    monkeypatch.setattr(_up, "_sleep", pauses.append)
    return str(path), pauses


def runs(binary_path):
    with open(binary_path + ".ran") as f:
        return f.read().splitlines()


def test_a_failed_larder_up_is_run_again_and_its_url_kept(tmp_path, monkeypatch):
    path, pauses = scripted(tmp_path, monkeypatch, "fails-once", fails=1)
    assert larder.start_server(binary=path, cwd=str(tmp_path)) == "http://127.0.0.1:9"
    assert pauses == [0.2] and runs(path) == ["up --for %d" % os.getpid()] * 2
    # Once it answered, its URL is this process's: not run again.
    assert larder.start_server(binary=path, cwd=str(tmp_path)) == "http://127.0.0.1:9"
    assert len(runs(path)) == 2


def test_a_failure_is_tried_three_times_and_not_kept(tmp_path, monkeypatch):
    path, pauses = scripted(tmp_path, monkeypatch, "fails-always", fails=1000)
    for call in (1, 2):
        with pytest.raises(larder.LarderError) as caught:
            larder.start_server(binary=path, cwd=str(tmp_path))
        # What the last run said, as before.
        assert caught.value.message == "Larder: `%s up --for %d` failed (exit 2): scripted larder: failure %d" % (
            path, os.getpid(), 3 * call)
        assert (caught.value.code, caught.value.details) == ("no_server", {"attempts": 3})
        assert len(runs(path)) == 3 * call
    assert pauses == [0.2, 0.5, 0.2, 0.5]


def test_what_is_not_a_failed_run_is_not_run_again(tmp_path, monkeypatch):
    # Exit 0 without a URL: an answer, not a run that could not start a server this time.
    path, pauses = scripted(tmp_path, monkeypatch, "no-url", fails=0, answer="ready")
    with pytest.raises(larder.LarderError) as caught:
        larder.start_server(binary=path, cwd=str(tmp_path))
    assert caught.value.message.endswith("failed (exit 0): it printed 'ready'")
    assert caught.value.details == {"attempts": 1} and len(runs(path)) == 1
    # A file that cannot be run at all.
    garbage = executable(tmp_path / "not-a-program", "\x7fELF garbage\n")
    with pytest.raises(larder.LarderError) as caught:
        larder.start_server(binary=garbage, cwd=str(tmp_path))
    assert caught.value.message.startswith("Larder: could not run `%s up" % garbage), caught.value.message
    assert caught.value.details == {"attempts": 1}
    assert pauses == []


def executable(path, text="#!/bin/sh\nexit 0\n"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


def test_the_binary_is_found_in_order(tmp_path, monkeypatch):
    given = executable(tmp_path / "given" / "larder")
    variable = executable(tmp_path / "variable" / "larder")
    shipped = executable(tmp_path / "shipped" / "larder")
    on_path = executable(tmp_path / "path" / "larder")
    monkeypatch.setattr(_up, "SHIPPED_BINARY", shipped)
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    monkeypatch.setenv("LARDER_BINARY", variable)
    assert larder.find_binary(given) == given
    assert larder.find_binary() == variable
    monkeypatch.delenv("LARDER_BINARY")
    assert larder.find_binary() == shipped
    monkeypatch.setattr(_up, "SHIPPED_BINARY", str(tmp_path / "not-shipped" / "larder"))
    assert larder.find_binary() == on_path
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert larder.find_binary() is None
    # Relative to `cwd`; a bare name from PATH.
    assert larder.find_binary("given/larder", cwd=str(tmp_path)) == given
    monkeypatch.setenv("PATH", str(tmp_path / "variable"))
    assert larder.find_binary("larder") == variable


def test_a_named_binary_that_is_not_there_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("LARDER_BINARY", str(tmp_path / "nothing"))
    with pytest.raises(larder.LarderError) as caught:
        larder.find_binary()
    assert caught.value.message == "Larder: LARDER_BINARY, %s, is not an executable file" % (tmp_path / "nothing")
    monkeypatch.delenv("LARDER_BINARY")
    with pytest.raises(larder.LarderError) as caught:
        larder.start_server(binary=str(tmp_path / "nothing"))
    assert "the binary given" in caught.value.message


def test_a_shipped_binary_without_its_executable_bit_gets_it_back(tmp_path, monkeypatch):
    shipped = tmp_path / "_server" / "larder"
    executable(shipped)
    shipped.chmod(0o644)
    monkeypatch.setattr(_up, "SHIPPED_BINARY", str(shipped))
    monkeypatch.delenv("LARDER_BINARY", raising=False)
    assert larder.find_binary() == str(shipped)
    assert os.access(str(shipped), os.X_OK)

