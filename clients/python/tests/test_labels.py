"""How a test helper labels its stores (clients/README.md): RUN/PACKAGE/TEST,
RUN from the caller, else the first of RUN_VARIABLES that is set (with its
condition), else none; at most LABEL_MAX_BYTES of UTF-8, cut at a character
boundary. The functions here; test_plugin.py runs the plugin with them, and
DELETE /stores?label_prefix= against the server."""
import pytest

import larder
from larder._client import LABEL_MAX_BYTES, RUN_VARIABLES

CI = {
    "GITHUB_ACTIONS": ("GITHUB_RUN_ID", "true"),
    "GITLAB_CI": ("CI_PIPELINE_ID", "true"),
    "BUILDKITE": ("BUILDKITE_BUILD_ID", "true"),
    "JENKINS_URL": ("BUILD_TAG", "https://jenkins.example/"),
    "CIRCLECI": ("CIRCLE_WORKFLOW_ID", "true"),
}


def test_no_run_without_a_variable():
    assert larder.run_prefix(environ={}) is None
    assert larder.store_label("tests/test_gallery.py", "TestSync::test_adds_album[x]") == \
        "tests/test_gallery.py/TestSync::test_adds_album[x]"
    assert larder.store_label("tests/test_gallery.py", "test_a", None) == "tests/test_gallery.py/test_a"
    assert larder.store_label("tests/test_gallery.py", "test_a", "") == "tests/test_gallery.py/test_a"


def test_larder_run():
    assert larder.run_prefix(environ={"LARDER_RUN": "nightly-42"}) == "nightly-42"
    assert larder.store_label("tests/test_gallery.py", "TestSync::test_adds_album[x]", "nightly-42") == \
        "nightly-42/tests/test_gallery.py/TestSync::test_adds_album[x]"
    # An empty one is not set.
    assert larder.run_prefix(environ={"LARDER_RUN": ""}) is None


def test_the_process_environment_by_default(monkeypatch):
    for pair in RUN_VARIABLES:
        for name in pair:
            if name:
                monkeypatch.delenv(name, raising=False)
    assert larder.run_prefix() is None
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_RUN_ID", "123")
    assert larder.run_prefix() == "123"
    monkeypatch.setenv("LARDER_RUN", "mine")
    assert larder.run_prefix() == "mine"
    assert larder.run_prefix("option") == "option"


@pytest.mark.parametrize("condition", sorted(CI))
def test_each_ci_system_on_its_own_system_only(condition):
    variable, value = CI[condition]
    assert (variable, condition) in RUN_VARIABLES
    assert larder.run_prefix(environ={variable: "77", condition: value}) == "77"
    # Its run id without its own variable (or with it empty) is not this system's.
    assert larder.run_prefix(environ={variable: "77"}) is None
    assert larder.run_prefix(environ={variable: "77", condition: ""}) is None
    # Its own variable without a run id: nothing.
    assert larder.run_prefix(environ={condition: value}) is None


def test_the_first_that_is_set_wins():
    both = {"GITHUB_ACTIONS": "true", "GITHUB_RUN_ID": "123", "GITLAB_CI": "true", "CI_PIPELINE_ID": "456"}
    assert larder.run_prefix(environ=both) == "123"
    assert larder.run_prefix(environ=dict(both, LARDER_RUN="mine")) == "mine"
    assert larder.run_prefix(environ=dict(both, GITHUB_RUN_ID="")) == "456"


def test_the_callers_run_wins():
    environ = {"LARDER_RUN": "mine", "GITHUB_ACTIONS": "true", "GITHUB_RUN_ID": "123"}
    assert larder.run_prefix("option", environ=environ) == "option"
    assert larder.run_prefix("", environ=environ) == "mine"  # an empty option is none
    assert larder.run_prefix(None, environ=environ) == "mine"


def test_the_same_name_in_two_files_or_classes():
    labels = {larder.store_label("a/test_x.py", "test_same"), larder.store_label("b/test_x.py", "test_same"),
              larder.store_label("a/test_x.py", "TestK::test_same")}
    assert len(labels) == 3


@pytest.mark.parametrize("run", [None, "r", "run-12"])
def test_a_long_label_is_cut_at_a_character_boundary(run):
    assert LABEL_MAX_BYTES == 256
    # 1-, 2-, 3- and 4-byte characters, so that the cut falls inside one whatever the prefix.
    test = "test_many[" + "aé日😀" * 40 + "]"
    full = (run + "/" if run else "") + "tests/test_unicode.py/" + test
    assert len(full.encode("utf-8")) > 256
    label = larder.store_label("tests/test_unicode.py", test, run)
    data = label.encode("utf-8")
    assert len(data) <= 256
    assert full.startswith(label)
    assert len(full[:len(label) + 1].encode("utf-8")) > 256  # one character more would not fit
    assert data.decode("utf-8") == label


def test_every_cut_position():
    # Whatever the prefix's length, the cut is at most 256 bytes, at a boundary, as long as fits.
    for pad in range(8):
        package = "p" * pad + ".py"
        full = package + "/" + "😀é日" * 100
        label = larder.store_label(package, "😀é日" * 100)
        assert full.startswith(label)
        assert 256 - 3 <= len(label.encode("utf-8")) <= 256
        assert len(full[:len(label) + 1].encode("utf-8")) > 256


def test_a_label_that_fits_is_unchanged():
    test = "é" * ((256 - len("p.py/")) // 2)
    assert len(larder.store_label("p.py", test).encode("utf-8")) == 255
    assert larder.store_label("p.py", test) == "p.py/" + test
    exact = "p.py/" + "a" + test
    assert len(exact.encode("utf-8")) == 256
    assert larder.store_label("p.py", "a" + test) == exact
