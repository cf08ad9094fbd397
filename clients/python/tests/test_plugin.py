"""The pytest plugin, as a user meets it: pytest runs a small suite
(tests/sample: one test passes, one fails, one takes the default template)
in a subprocess, with the package installed in this environment and nothing
but its `pytest11` entry point to load the plugin. Then the failing test's
store must be kept with its artifact saved, the passing tests' stores gone.
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

SAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sample")


def open_db(path):
    """The SQLite file with Python's own driver: autocommit, closed on leaving `with`."""
    return contextlib.closing(sqlite3.connect(str(path), isolation_level=None))


def run_sample(server, work, *args, env=None):
    """pytest on a copy of the sample suite in `work`; (exit code, output, records)."""
    suite = work / "suite"
    shutil.copytree(SAMPLE, str(suite))
    records = work / "records"
    records.mkdir()
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("LARDER_", "PYTEST_")) and k != "PYTHONPATH"}
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


def check_outcome(server, work, artifacts, code, output, records):
    assert code == 1, output
    assert "1 failed, 2 passed" in output, output
    assert set(records) == {"passes", "fails", "default"}, output
    client = larder.Client(url=server.url)

    # The passing tests' stores are gone.
    for name in ("passes", "default"):
        with pytest.raises(larder.LarderError) as caught:
            client.store(records[name]["id"])
        assert caught.value.code == "store_not_found", name
    assert records["passes"]["label"] == "test_gallery.py::test_passes"
    assert records["default"]["template"] == "gallery"

    # The failing test's store is kept, labelled with its node id.
    failed_id = records["fails"]["id"]
    kept = client.store(failed_id)
    assert kept.info["keep"] is True
    assert kept.info["label"] == "test_gallery.py::test_fails"
    assert kept.counts("artworks") == {"artworks": 13}

    # Its artifact is saved, named after the test and the store.
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

    kept.delete()
    client.close()


def test_failed_test_keeps_its_store_and_saves_the_artifact(server, tmp_path):
    # The URL and the template from the command line; artifacts in the default place.
    code, output, records = run_sample(server, tmp_path, "--larder-url", server.url, "--larder-template", "gallery")
    check_outcome(server, tmp_path, tmp_path / "suite" / "larder-artifacts", code, output, records)


def test_with_xdist(server, tmp_path):
    pytest.importorskip("xdist", reason="pytest-xdist is not installed")
    # The URL, the template and the artifacts directory from the environment.
    artifacts = tmp_path / "from-env"
    code, output, records = run_sample(server, tmp_path, "-p", "xdist", "-n", "2",
                                       env={"LARDER_URL": server.url, "LARDER_TEMPLATE": "gallery",
                                            "LARDER_ARTIFACTS": str(artifacts)})
    assert "2 workers" in output, output
    check_outcome(server, tmp_path, artifacts, code, output, records)


def test_marker_is_registered_and_options_are_listed(tmp_path):
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("LARDER_", "PYTEST_"))}
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--markers"], cwd=str(tmp_path),
                            env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    assert "@pytest.mark.larder(template=None, fixtures=None" in result.stdout.decode()
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--help"], cwd=str(tmp_path),
                            env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    text = result.stdout.decode()
    for option in ("--larder-url", "--larder-binary", "--larder-fixtures", "--larder-template", "--larder-artifacts"):
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
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("LARDER_", "PYTEST_")) and k != "PYTHONPATH"}
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
