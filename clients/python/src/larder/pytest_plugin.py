"""pytest plugin of the Larder client, registered through the `pytest11`
entry point: installing the package activates it.

- fixture `larder_client`: a `larder.Client` (one per session, so one per
  pytest-xdist worker), from --larder-url / $LARDER_URL and $LARDER_TOKEN;
- fixture `larder_store`: a fresh store for each test, labelled with the
  test's node id and made as the closest `@pytest.mark.larder(...)` says
  (template, fixtures, version, snapshot, build, ttl_seconds); without a
  template there, --larder-template / $LARDER_TEMPLATE; without either, an
  empty store;
- after a passing test the store is deleted. After a failing one (its setup
  or call failed) it is kept (PATCH keep) and its artifact saved into
  --larder-artifacts / $LARDER_ARTIFACTS (default `larder-artifacts/`) as
  `<node id made file-safe>-<store id>.zip`. The test's report says where:
  a "larder" section shown under the failure, the user properties
  `larder_store` and `larder_artifact` (JUnit XML <property>), and a list at
  the end of the terminal summary.

State lives on the config and the items only, never in module globals, so
each pytest-xdist worker is on its own.
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional, Tuple

import pytest

from ._client import Client, LarderError, Store

MARKER_FIELDS = ("template", "fixtures", "version", "snapshot", "build", "ttl_seconds")

_reports_key = pytest.StashKey[Dict[str, Any]]()
_kept_key = pytest.StashKey[Tuple[str, str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("larder", "Larder stores for tests")
    group.addoption("--larder-url", default=None, metavar="URL",
                    help="Larder server (default: $LARDER_URL, else http://127.0.0.1:7464); "
                         "its token comes from $LARDER_TOKEN.")
    group.addoption("--larder-template", default=None, metavar="NAME",
                    help="Template of a larder_store whose larder marker names none (default: $LARDER_TEMPLATE; "
                         "without one, an empty store).")
    group.addoption("--larder-artifacts", default=None, metavar="DIR",
                    help="Where the artifacts of failed tests' stores are saved (default: $LARDER_ARTIFACTS, "
                         "else larder-artifacts/ in the working directory).")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "larder(template=None, fixtures=None, version=None, snapshot=None, build=None, ttl_seconds=None): "
        "how the larder_store fixture makes this test's store (the closest marker wins, field by field).")
    config.pluginmanager.register(_Summary(), "larder-summary")


def _setting(config: pytest.Config, option: str, variable: str) -> Optional[str]:
    return config.getoption(option) or os.environ.get(variable) or None


def artifacts_dir(config: pytest.Config) -> str:
    """The directory artifacts go to, absolute (relative to where pytest was started)."""
    directory = _setting(config, "larder_artifacts", "LARDER_ARTIFACTS") or "larder-artifacts"
    return os.path.join(str(config.invocation_params.dir), os.path.expanduser(directory))


def file_safe(name: str, limit: int = 150) -> str:
    """A node id as a file name: runs of anything but letters, digits, `.`,
    `_` and `-` become one `_`; at most `limit` characters."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-")
    return safe[:limit].rstrip("._-") or "test"


def store_options(item: pytest.Item) -> Dict[str, Any]:
    """create_store arguments of an item: its larder markers, closest first,
    field by field (a field set to None there means "not this"), then the
    default template when none names a template or a build."""
    options: Dict[str, Any] = {}
    for marker in item.iter_markers("larder"):
        if len(marker.args) > 1:
            pytest.fail("@pytest.mark.larder takes at most one positional argument (the template), got %r"
                        % (marker.args,), pytrace=False)
        if marker.args:
            options.setdefault("template", marker.args[0])
        for key, value in marker.kwargs.items():
            if key not in MARKER_FIELDS:
                pytest.fail("@pytest.mark.larder: unknown field %r (known: %s)" % (key, ", ".join(MARKER_FIELDS)),
                            pytrace=False)
            options.setdefault(key, value)
    if "template" not in options and "build" not in options:
        default = _setting(item.config, "larder_template", "LARDER_TEMPLATE")
        if default:
            options["template"] = default
    return {key: value for key, value in options.items() if value is not None}


@pytest.fixture(scope="session")
def larder_client(pytestconfig: pytest.Config):
    """The Larder client of this session (of this worker, under xdist)."""
    client = Client(url=pytestconfig.getoption("larder_url"))
    yield client
    client.close()


@pytest.fixture
def larder_store(request: pytest.FixtureRequest, larder_client: Client):
    """A fresh store for this test; deleted after a pass, kept with its
    artifact saved after a failure."""
    item = request.node
    options = store_options(item)
    try:
        store = larder_client.create_store(label=item.nodeid, **options)
    except LarderError as error:
        failure = "larder_store: no store from %s with %r: %s" % (larder_client.url, options, error)
    else:
        failure = None
    if failure is not None:
        pytest.fail(failure, pytrace=False)
    yield store
    reports = item.stash.get(_reports_key, {})
    failed = any(report.failed for when, report in reports.items() if when in ("setup", "call"))
    if failed:
        _keep(item, store)
    else:
        try:
            store.delete()
        except LarderError as error:
            if error.code != "store_not_found":  # the test deleted it itself
                raise


def _keep(item: pytest.Item, store: Store) -> None:
    try:
        store.keep()
    except LarderError as error:
        if error.code == "store_not_found":  # the test deleted it itself: nothing to keep
            return
        raise
    path = os.path.join(artifacts_dir(item.config), "%s-%s.zip" % (file_safe(item.nodeid), store.id))
    store.artifact(path)
    item.user_properties.append(("larder_store", store.id))
    item.user_properties.append(("larder_artifact", path))
    item.stash[_kept_key] = (store.id, path)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    item.stash.setdefault(_reports_key, {})[report.when] = report
    if report.when == "teardown" and _kept_key in item.stash:
        store_id, path = item.stash[_kept_key]
        # A section whose title says "teardown" is printed under the test's
        # failure in the summary, by pytest and by xdist's controller alike.
        report.sections.append(("larder (teardown)", "store %s kept; artifact: %s" % (store_id, path)))


class _Summary:
    """Lists the kept stores at the end of the terminal summary (on the
    xdist controller too: it reads the reports the workers send)."""

    def __init__(self) -> None:
        self.kept: List[Tuple[str, str, str]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        properties = dict((name, value) for name, value in report.user_properties
                          if name in ("larder_store", "larder_artifact"))
        if "larder_store" in properties:
            self.kept.append((report.nodeid, str(properties["larder_store"]), str(properties.get("larder_artifact"))))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.kept:
            return
        terminalreporter.section("larder: stores kept after failures")
        for nodeid, store_id, path in self.kept:
            terminalreporter.write_line("%s: store %s, artifact %s" % (nodeid, store_id, path))
