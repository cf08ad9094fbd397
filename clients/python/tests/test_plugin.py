"""The pytest plugin, as a user meets it: pytest runs a small suite
(tests/sample: one test passes, one fails, one takes the default template)
in a subprocess, with the package installed in this environment and nothing
but its `pytest11` entry point to load the plugin. Then the failing test's
store must be kept with its artifact saved, the passing tests' stores gone;
every store labelled RUN/PACKAGE/TEST, and a run's stores removed by its prefix.
"""
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import uuid
import xml.etree.ElementTree as ElementTree
import zipfile

import pytest

import larder
from larder._client import RUN_VARIABLES

SAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sample")


def open_db(path):
    """The SQLite file with Python's own driver: autocommit, closed on leaving `with`."""
    return contextlib.closing(sqlite3.connect(str(path), isolation_level=None))


# The variables a run prefix comes from: not inherited by the suites run here
# (a CI system running these tests sets some), only set where a test says.
RUN_ENVIRONMENT = {name for pair in RUN_VARIABLES for name in pair if name}


def clean_environment():
    """This process's environment without Larder's, pytest's and the run prefix's variables."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("LARDER_", "PYTEST_")) and k != "PYTHONPATH" and k not in RUN_ENVIRONMENT}


def run_sample(server, work, *args, env=None):
    """pytest on a copy of the sample suite in `work`; (exit code, output, records)."""
    suite = work / "suite"
    shutil.copytree(SAMPLE, str(suite))
    records = work / "records"
    records.mkdir()
    environment = clean_environment()
    environment["SAMPLE_RECORDS"] = str(records)
    environment.update(env or {})
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(suite),
               "--junitxml", str(work / "junit.xml"), *args, "test_gallery.py", "test_default.py"]
    result = subprocess.run(command, cwd=str(suite), env=environment, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, timeout=120)
    output = result.stdout.decode("utf-8", "replace")
    found = {}
    for name in ("passes", "fails", "default"):
        path = records / (name + ".json")
        if path.exists():
            found[name] = json.loads(path.read_text())
    return result.returncode, output, found


def check_outcome(server, work, artifacts, code, output, records, run=None):
    """The sample's outcome, its stores labelled RUN/PACKAGE/TEST (`run`:
    RUN, or None for none); answers the failing test's kept store."""
    prefix = run + "/" if run else ""
    assert code == 1, output
    assert "1 failed, 2 passed" in output, output
    assert set(records) == {"passes", "fails", "default"}, output
    client = larder.Client(url=server.url)

    # The passing tests' stores are gone.
    for name in ("passes", "default"):
        with pytest.raises(larder.LarderError) as caught:
            client.store(records[name]["id"])
        assert caught.value.code == "store_not_found", name
    assert records["passes"]["label"] == prefix + "test_gallery.py/test_passes"
    assert records["default"]["label"] == prefix + "test_default.py/test_default_template"
    assert records["default"]["template"] == "gallery"

    # The failing test's store is kept, labelled with its run, file and name.
    failed_id = records["fails"]["id"]
    kept = client.store(failed_id)
    assert kept.info["keep"] is True
    assert kept.info["label"] == prefix + "test_gallery.py/test_fails"
    assert kept.counts("artworks") == {"artworks": 13}

    # Its artifact is saved, named after the test (its node id, without the run) and the store.
    zip_path = artifacts / ("test_gallery.py_test_fails-%s.zip" % failed_id)
    assert sorted(os.listdir(str(artifacts))) == [zip_path.name], output
    with zipfile.ZipFile(str(zip_path)) as archive:
        assert "store.sqlite" in archive.namelist()
        archive.extract("store.sqlite", str(work))
    with open_db(work / "store.sqlite") as db:
        assert db.execute("SELECT year FROM artworks WHERE title = 'Abaporu'").fetchone() == (1928,)

    # The report says where: under the failure, in the closing summary, in JUnit XML.
    assert "larder (teardown)" in output
    assert "store %s kept; artifact: %s" % (failed_id, zip_path) in output
    assert "stores kept after failures" in output
    assert "test_gallery.py::test_fails: store %s, artifact %s" % (failed_id, zip_path) in output
    cases = {case.get("name"): case for case in ElementTree.parse(str(work / "junit.xml")).iter("testcase")}
    assert set(cases) == {"test_passes", "test_fails", "test_default_template"}
    properties = {p.get("name"): p.get("value") for p in cases["test_fails"].iter("property")}
    assert properties == {"larder_store": failed_id, "larder_artifact": str(zip_path)}
    assert cases["test_fails"].find("failure") is not None
    assert not list(cases["test_passes"].iter("property"))

    client.close()
    return kept


def test_failed_test_keeps_its_store_and_saves_the_artifact(server, tmp_path):
    # The URL and the template from the command line; artifacts in the default place; no run prefix.
    code, output, records = run_sample(server, tmp_path, "--larder-url", server.url, "--larder-template", "gallery")
    check_outcome(server, tmp_path, tmp_path / "suite" / "larder-artifacts", code, output, records).delete()


def test_with_xdist(server, tmp_path):
    pytest.importorskip("xdist", reason="pytest-xdist is not installed")
    # The URL, the template and the artifacts directory from the environment;
    # the run prefix from the command line, which every worker gets.
    artifacts = tmp_path / "from-env"
    run = "xdist-" + uuid.uuid4().hex[:8]
    code, output, records = run_sample(server, tmp_path, "-p", "xdist", "-n", "2", "--larder-run", run,
                                       env={"LARDER_URL": server.url, "LARDER_TEMPLATE": "gallery",
                                            "LARDER_ARTIFACTS": str(artifacts), "LARDER_RUN": "not-this-one"})
    assert "2 workers" in output, output
    check_outcome(server, tmp_path, artifacts, code, output, records, run=run).delete()


def test_a_runs_stores_are_removed_by_its_prefix(server, tmp_path):
    # A CI run (GitHub Actions' run id, as its runner sets it): the failing test's store is kept ...
    run = str(uuid.uuid4().int % 10 ** 10)
    code, output, records = run_sample(server, tmp_path, "--larder-url", server.url, "--larder-template", "gallery",
                                       env={"GITHUB_ACTIONS": "true", "GITHUB_RUN_ID": run})
    kept = check_outcome(server, tmp_path, tmp_path / "suite" / "larder-artifacts", code, output, records, run=run)
    client = larder.Client(url=server.url)
    # ... beside the kept stores of other runs, one whose id starts with this one's.
    others = [client.create_store(label="%s/test_gallery.py/test_fails" % other).keep() for other in (run + "7", "other")]
    # The one-line clean-up of a run: DELETE /stores?label_prefix=RUN/.
    assert client.delete_stores(label_prefix=run + "/") == 1
    with pytest.raises(larder.LarderError) as caught:
        client.store(kept.id)
    assert caught.value.code == "store_not_found"
    for other in others:
        assert client.store(other.id).info["keep"] is True
    assert client.delete_stores(label_prefix=run + "/") == 0
    for other in others:
        other.delete()
    client.close()


# --- remote mode: a server whose files this machine cannot open -----------------------

REMOTE_CONFTEST = '''
import json
import os

import pytest


@pytest.fixture
def record(request):
    """Notes this test's store: its id, its path (the local copy) and the server's."""
    def write(store):
        with open(os.path.join(os.environ["RECORDS"], request.node.name + ".json"), "w") as f:
            json.dump({"id": store.id, "path": store.path, "server_path": store.info["path"],
                       "remote": store.remote}, f)
    return write
'''

REMOTE_TESTS = '''
import contextlib
import sqlite3

import pytest

pytestmark = pytest.mark.larder(template="gallery", fixtures=["artists"])


def add_artwork(store, title):
    with contextlib.closing(sqlite3.connect(store.path, isolation_level=None)) as db:
        db.execute("INSERT INTO artworks (artist_id, title, year) VALUES (3, ?, 1928)", [title])


def test_passes(larder_store, record):
    record(larder_store)
    add_artwork(larder_store, "Operarios")


def test_fails(larder_store, record):
    record(larder_store)
    add_artwork(larder_store, "Abaporu")
    assert larder_store.counts("artworks") == {"artworks": 1}, "the server has the last check-in: none yet"


def test_fails_with_a_broken_copy(larder_store, record):
    record(larder_store)
    add_artwork(larder_store, "A Negra")
    with open(larder_store.path, "r+b") as f:
        f.write(b"no longer a SQLite database")
    assert False, "broken on purpose"
'''


def test_remote_mode_checks_in_a_failed_tests_copy_and_drops_a_passing_ones(hidden_server, tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(REMOTE_CONFTEST)
    (suite / "test_remote.py").write_text(REMOTE_TESTS)
    records = tmp_path / "records"
    records.mkdir()
    run = "remote-" + uuid.uuid4().hex[:8]
    environment = clean_environment()
    environment.update({"LARDER_URL": hidden_server.url, "LARDER_MODE": "remote", "LARDER_RUN": run,
                        "RECORDS": str(records)})
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(suite)],
                            cwd=str(suite), env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    output = result.stdout.decode("utf-8", "replace")
    assert result.returncode == 1, output
    assert "2 failed, 1 passed" in output, output
    found = {path.stem: json.loads(path.read_text()) for path in records.iterdir()}
    assert set(found) == {"test_passes", "test_fails", "test_fails_with_a_broken_copy"}
    for name, record in found.items():
        assert record["remote"] is True, name
        assert not os.path.exists(record["server_path"]), name  # the server's files are out of sight
        assert not os.path.exists(os.path.dirname(record["path"])), name  # the local copy is gone

    client = larder.Client(url=hidden_server.url)
    stores = {s["label"]: s for s in client._call("GET", "/stores", query={"label_prefix": run + "/"})["stores"]}
    # The passing test's store is gone, with nothing uploaded; the failing ones' are kept.
    assert sorted(stores) == [run + "/test_remote.py/test_fails", run + "/test_remote.py/test_fails_with_a_broken_copy"]
    kept = client.store(found["test_fails"]["id"])
    assert kept.info["keep"] is True
    # What the test wrote to its copy was checked in: the diff and the artifact show it.
    artworks = kept.diff()["tables"]["artworks"]
    assert artworks["inserted"] == 1 and artworks["rows"][0]["new"]["title"] == "Abaporu", artworks
    artifact = suite / "larder-artifacts" / ("test_remote.py_test_fails-%s.zip" % kept.id)
    assert "store %s kept; artifact: %s" % (kept.id, artifact) in output, output
    with zipfile.ZipFile(str(artifact)) as archive:
        archive.extract("store.sqlite", str(tmp_path / "fails"))
    with open_db(tmp_path / "fails" / "store.sqlite") as db:
        assert db.execute("SELECT title FROM artworks").fetchall() == [("Abaporu",)]

    # A copy the server refuses: the failure says so; the store is kept as
    # last checked in (as it was made), its artifact saved all the same.
    broken = client.store(found["test_fails_with_a_broken_copy"]["id"])
    assert broken.info["keep"] is True
    assert broken.diff()["tables"] == {}
    artifact = suite / "larder-artifacts" / ("test_remote.py_test_fails_with_a_broken_copy-%s.zip" % broken.id)
    assert artifact.exists()
    assert "store %s kept; artifact: %s" % (broken.id, artifact) in output, output
    assert ("store %s: the check-in of its local copy failed (" % broken.id) in output, output
    assert "it is kept with what was last checked in" in output, output
    assert client.delete_stores(label_prefix=run + "/") == 2
    client.close()


MODE_TESTS = '''
import os


def test_mode(larder_client):
    assert larder_client.mode == os.environ["EXPECTED_MODE"]
'''


def test_the_plugins_mode_from_its_option_or_larder_mode(server, tmp_path):
    (tmp_path / "test_mode.py").write_text(MODE_TESTS)

    def run(*args, **env):
        environment = clean_environment()
        environment.update({"LARDER_URL": server.url}, **env)
        result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                                 *args], cwd=str(tmp_path), env=environment, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, timeout=60)
        return result.returncode, result.stdout.decode("utf-8", "replace")

    # A loopback URL is local, unless the option (which beats $LARDER_MODE) says remote.
    code, output = run("--larder-mode", "remote", EXPECTED_MODE="remote", LARDER_MODE="local")
    assert code == 0, output
    code, output = run(EXPECTED_MODE="local")
    assert code == 0, output
    # Neither remote nor local: every test that needs the client fails, saying why.
    code, output = run(EXPECTED_MODE="local", LARDER_MODE="far")
    assert code == 1, output
    assert "larder_client: LARDER_MODE is 'far': set it to 'remote' or 'local'" in output, output


# --- labels: RUN/PACKAGE/TEST ------------------------------------------------------

LABEL_CONFTEST = '''
import json
import os

import pytest


@pytest.fixture
def record(request):
    """Notes the label the server has for this test's store."""
    def write(store):
        with open(os.path.join(os.environ["RECORDS"], "labels.jsonl"), "a", encoding="utf-8") as f:
            f.write(json.dumps({"nodeid": request.node.nodeid, "label": store.info["label"]}) + "\\n")
    return write
'''

LONG_NAME = "test_long_x" + "日本語" * 40  # 371 bytes of UTF-8

LABEL_ONE = '''
def test_same(larder_store, record):
    record(larder_store)


def %s(larder_store, record):
    record(larder_store)
''' % LONG_NAME

LABEL_TWO = '''
import pytest


def test_same(larder_store, record):
    record(larder_store)


class TestGroup:
    def test_same(self, larder_store, record):
        record(larder_store)


@pytest.mark.parametrize("n", [1, 2])
def test_param(larder_store, record, n):
    record(larder_store)
'''

SHORT_LABELS = {
    "test_one.py::test_same": "test_one.py/test_same",
    "sub/test_two.py::test_same": "sub/test_two.py/test_same",
    "sub/test_two.py::TestGroup::test_same": "sub/test_two.py/TestGroup::test_same",
    "sub/test_two.py::test_param[1]": "sub/test_two.py/test_param[1]",
    "sub/test_two.py::test_param[2]": "sub/test_two.py/test_param[2]",
}


@pytest.mark.parametrize("args, env, run", [
    ([], {}, None),
    ([], {"LARDER_RUN": "run-7"}, "run-7"),
    ([], {"GITHUB_ACTIONS": "true", "GITHUB_RUN_ID": "123"}, "123"),
    # A CI system's run id without its own variable is another system's: ignored.
    ([], {"GITHUB_RUN_ID": "123", "CI_PIPELINE_ID": "456", "GITLAB_CI": ""}, None),
    ([], {"LARDER_RUN": "run-7", "GITHUB_ACTIONS": "true", "GITHUB_RUN_ID": "123"}, "run-7"),
    # The option wins over every variable.
    (["--larder-run", "opt-1"], {"LARDER_RUN": "run-7", "GITHUB_ACTIONS": "true", "GITHUB_RUN_ID": "123"}, "opt-1"),
], ids=["none", "LARDER_RUN", "github", "ci-id-alone", "LARDER_RUN-first", "option"])
def test_the_labels_of_a_run(server, tmp_path, args, env, run):
    suite = tmp_path / "suite"
    (suite / "sub").mkdir(parents=True)
    (suite / "conftest.py").write_text(LABEL_CONFTEST)
    (suite / "test_one.py").write_text(LABEL_ONE, encoding="utf-8")
    (suite / "sub" / "test_two.py").write_text(LABEL_TWO)
    records = tmp_path / "records"
    records.mkdir()
    environment = clean_environment()
    environment.update({"LARDER_URL": server.url, "RECORDS": str(records), "PYTHONIOENCODING": "utf-8"})
    environment.update(env)
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(suite), *args],
                            cwd=str(suite), env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    output = result.stdout.decode("utf-8", "replace")
    assert result.returncode == 0, output
    assert "6 passed" in output, output
    labels = {}
    for line in (records / "labels.jsonl").read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        labels[entry["nodeid"]] = entry["label"]
    prefix = run + "/" if run else ""

    long_node = "test_one.py::" + LONG_NAME
    assert sorted(labels) == sorted(list(SHORT_LABELS) + [long_node])
    for node, label in SHORT_LABELS.items():
        assert labels[node] == prefix + label
    # The same test name in two files, and in a class of the same file: labels of their own.
    same = [labels[node] for node in SHORT_LABELS if node.endswith("test_same")]
    assert len(set(same)) == 3, same

    # The long one: its start, as many whole characters as fit in 256 bytes.
    full = prefix + "test_one.py/" + LONG_NAME
    cut = labels[long_node]
    assert len(full.encode("utf-8")) > 256
    assert full.startswith(cut), cut
    assert len(cut.encode("utf-8")) <= 256
    assert len(full[:len(cut) + 1].encode("utf-8")) > 256, cut  # one character more would not fit


def test_marker_is_registered_and_options_are_listed(tmp_path):
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("LARDER_", "PYTEST_"))}
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--markers"], cwd=str(tmp_path),
                            env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    assert "@pytest.mark.larder(template=None, fixtures=None" in result.stdout.decode()
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--help"], cwd=str(tmp_path),
                            env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    text = result.stdout.decode()
    for option in ("--larder-url", "--larder-binary", "--larder-fixtures", "--larder-template", "--larder-run",
                   "--larder-mode", "--larder-artifacts"):
        assert option in text


def test_the_readme_example_passes(tmp_path):
    # As the README runs it: `pytest test_gallery.py` in a project with
    # fixtures/gallery, the server started by the plugin (from LARDER_BINARY here).
    with open(os.path.join(os.path.dirname(SAMPLE), "..", "README.md"), encoding="utf-8") as f:
        readme = f.read()
    example = readme.split("## A complete example test", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert "def test_" in example
    (tmp_path / "test_gallery.py").write_text(example)
    repo = os.path.abspath(os.path.join(os.path.dirname(SAMPLE), "..", "..", ".."))
    shutil.copytree(os.path.join(repo, "fixtures", "gallery"), str(tmp_path / "fixtures" / "gallery"))
    (tmp_path / "tmp").mkdir()
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("LARDER_", "PYTEST_"))}
    environment.update({"LARDER_BINARY": os.environ["LARDER_BINARY"], "TMPDIR": str(tmp_path / "tmp")})
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-W", "error", "test_gallery.py"],
                            cwd=str(tmp_path), env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    output = result.stdout.decode("utf-8", "replace")
    assert result.returncode == 0, output
    assert "4 passed" in output, output
    assert not (tmp_path / "larder-artifacts").exists()


# --- the session's build: the hook pytest_larder_build ---------------------------

BUILD_CONFTEST = '''
import os
import sqlite3

import pytest


def migrate(path):
    """What a Django conftest's callback does: point the default database at
    path, call_command("migrate"); here with Python's sqlite3."""
    with open(os.path.join(os.environ["RECORDS"], "migrate-%d" % os.getpid()), "a") as f:
        f.write(path + "\\n")
    if os.environ.get("MIGRATE_FAILS"):
        raise RuntimeError("0002_product_price failed: " + os.environ["MIGRATE_FAILS"])
    db = sqlite3.connect(path)
    with db:
        db.execute("CREATE TABLE django_migrations (id integer NOT NULL PRIMARY KEY AUTOINCREMENT, "
                   "app varchar(255) NOT NULL, name varchar(255) NOT NULL, applied datetime NOT NULL)")
        db.execute("CREATE TABLE shop_product (id integer NOT NULL PRIMARY KEY AUTOINCREMENT, name varchar(100) NOT NULL)")
        db.execute("INSERT INTO shop_product (name) VALUES ('Teapot'), ('Kettle')")
        db.executemany("INSERT INTO django_migrations (app, name, applied) VALUES ('shop', ?, '2024-06-13')",
                       [("0001_initial",), ("0002_product_price",)])
    db.close()


def pytest_larder_build(client):
    with open(os.path.join(os.environ["RECORDS"], "hook-%d" % os.getpid()), "a") as f:
        f.write("called\\n")
    if os.environ.get("HOOK_RETURNS_NONE"):
        return None
    return client.build(os.environ["BUILD_KEY"], migrate, label="conftest")
'''

BUILD_TESTS = '''
import os

import pytest

KEY = os.environ["BUILD_KEY"]


def test_default_is_the_build(larder_store):
    assert larder_store.info["build"] == KEY
    assert larder_store.query("SELECT name FROM django_migrations ORDER BY id")["rows"] == [
        ["0001_initial"], ["0002_product_price"]]
    larder_store.query("INSERT INTO shop_product (name) VALUES ('mine')")
    assert larder_store.counts("shop_product") == {"shop_product": 3}


@pytest.mark.larder(template="gallery", fixtures=["artists"])
def test_a_template_in_the_marker_wins(larder_store):
    assert larder_store.info["template"] == "gallery"
    assert larder_store.info["build"] is None
    assert larder_store.counts("artists") == {"artists": 4}


def test_each_test_has_a_copy_of_its_own(larder_store):
    assert larder_store.info["build"] == KEY
    assert larder_store.counts("shop_product") == {"shop_product": 2}


@pytest.mark.larder(build=os.environ["OTHER_KEY"])
def test_a_build_in_the_marker_wins(larder_store):
    assert larder_store.info["build"] == os.environ["OTHER_KEY"]
    assert larder_store.counts() == {"other": 1}


@pytest.mark.larder(template=None)
def test_template_none_is_an_empty_store(larder_store):
    assert (larder_store.info["template"], larder_store.info["build"]) == (None, None)
    assert larder_store.counts() == {}


class TestMore:
    def test_a_third_copy(self, larder_store):
        assert larder_store.info["build"] == KEY
        assert larder_store.counts("shop_product") == {"shop_product": 2}
'''


def run_build_suite(server, work, *args, env=None, tests=BUILD_TESTS):
    """pytest on a suite of BUILD_CONFTEST and `tests` in `work`;
    (exit code, output, {record file: lines})."""
    suite = work / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(BUILD_CONFTEST)
    (suite / "test_app.py").write_text(tests)
    records = work / "records"
    records.mkdir()
    environment = clean_environment()
    environment.update({"RECORDS": str(records), "LARDER_URL": server.url})
    environment.update(env or {})
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(suite), *args]
    result = subprocess.run(command, cwd=str(suite), env=environment, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, timeout=120)
    found = {path.name: path.read_text().splitlines() for path in records.iterdir()}
    return result.returncode, result.stdout.decode("utf-8", "replace"), found


def other_build(client):
    def migrate(path):
        with open_db(path) as db:
            db.execute("CREATE TABLE other (x)")
            db.execute("INSERT INTO other VALUES (1)")
    return client.build("other-" + uuid.uuid4().hex, migrate)


def calls(records, kind):
    return {name: lines for name, lines in records.items() if name.startswith(kind + "-")}


@pytest.mark.parametrize("xdist", [False, True], ids=["plain", "xdist"])
def test_the_hook_builds_the_default_of_the_session(server, tmp_path, xdist):
    args = ["--larder-template", "gallery"]  # the hook's build comes first
    if xdist:
        pytest.importorskip("xdist", reason="pytest-xdist is not installed")
        args += ["-p", "xdist", "-n", "2"]
    client = larder.Client(url=server.url)
    key, other = "django-" + uuid.uuid4().hex, other_build(client)
    code, output, records = run_build_suite(server, tmp_path, *args, env={"BUILD_KEY": key, "OTHER_KEY": other})
    assert code == 0, output
    assert "6 passed" in output, output
    # Once per session (per worker), built once in all.
    hooks, migrates = calls(records, "hook"), calls(records, "migrate")
    assert hooks and all(lines == ["called"] for lines in hooks.values()), records
    if xdist:
        assert "2 workers" in output, output
    else:
        assert len(hooks) == 1
    assert sum(len(lines) for lines in migrates.values()) == 1, records
    info = client.build_info(key)
    assert (info["state"], info["label"], info["counts"]["shop_product"]) == ("ready", "conftest", 2)
    # The passing tests' stores are gone.
    assert [s for s in client._call("GET", "/stores")["stores"] if s["label"] and "test_app.py" in s["label"]] == []

    # The next session finds it built: the hook is called, the migrator is not.
    shutil.rmtree(str(tmp_path / "suite"))
    shutil.rmtree(str(tmp_path / "records"))
    code, output, records = run_build_suite(server, tmp_path, env={"BUILD_KEY": key, "OTHER_KEY": other})
    assert code == 0, output
    assert len(calls(records, "hook")) == 1 and calls(records, "migrate") == {}, records
    client.discard_build(key)
    client.discard_build(other)
    client.close()


def test_a_failing_build_hook_errors_the_tests_that_need_it(server, tmp_path):
    client = larder.Client(url=server.url)
    key, other = "django-" + uuid.uuid4().hex, other_build(client)
    code, output, records = run_build_suite(server, tmp_path,
                                            env={"BUILD_KEY": key, "OTHER_KEY": other, "MIGRATE_FAILS": "boom"})
    assert code == 1, output
    # The tests that name a template or build (or none) pass; the other three error.
    assert "3 passed, 3 errors" in output, output
    # The first with the migrator's traceback, the later ones in a line.
    assert "RuntimeError: 0002_product_price failed: boom" in output, output
    assert output.count("the session's build failed") >= 2, output
    assert sum(len(lines) for lines in calls(records, "migrate").values()) == 1, records
    assert sum(len(lines) for lines in calls(records, "hook").values()) == 1, records
    # Discarded: the next try builds again.
    with pytest.raises(larder.LarderError) as caught:
        client.build_info(key)
    assert caught.value.code == "unknown_build"
    client.discard_build(other)
    client.close()


DEFAULT_TEMPLATE_TESTS = '''
def test_the_default_template(larder_store):
    assert (larder_store.info["template"], larder_store.info["build"]) == ("gallery", None)


def test_again(larder_store):
    assert larder_store.info["template"] == "gallery"
'''


def test_a_hook_answering_none_leaves_the_default_template(server, tmp_path):
    code, output, records = run_build_suite(server, tmp_path, "--larder-template", "gallery",
                                            env={"HOOK_RETURNS_NONE": "1"}, tests=DEFAULT_TEMPLATE_TESTS)
    assert code == 0, output
    assert "2 passed" in output, output
    # Asked once; no build, so the default template.
    assert list(calls(records, "hook").values()) == [["called"]], records
    assert calls(records, "migrate") == {}, records
