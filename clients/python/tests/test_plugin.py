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
    for option in ("--larder-url", "--larder-template", "--larder-artifacts"):
        assert option in text


def test_the_readme_example_passes(server, tmp_path):
    with open(os.path.join(os.path.dirname(SAMPLE), "..", "README.md"), encoding="utf-8") as f:
        readme = f.read()
    example = readme.split("```python\n", 1)[1].split("```", 1)[0]
    assert "def test_" in example
    (tmp_path / "test_gallery.py").write_text(example)
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("LARDER_", "PYTEST_"))}
    environment["LARDER_URL"] = server.url
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-W", "error", "test_gallery.py"],
                            cwd=str(tmp_path), env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    output = result.stdout.decode("utf-8", "replace")
    assert result.returncode == 0, output
    assert "4 passed" in output, output
    assert not (tmp_path / "larder-artifacts").exists()
