"""pytest plugin of the Larder client, registered through the `pytest11`
entry point: installing the package activates it.

- fixture `larder_client`: a `larder.Client` (one per session, so one per
  pytest-xdist worker) of --larder-url / $LARDER_URL, with $LARDER_TOKEN;
  with neither, of the run's shared server, which `larder up` starts the
  first time a test needs it (`larder.start_server`: the binary from
  --larder-binary / $LARDER_BINARY, the package's own, or PATH; the
  fixtures folder from --larder-fixtures / $LARDER_FIXTURES; serving this
  process and, under xdist, the controller, so the workers share it). When
  that fails, the test errors with why, and the next test that needs the
  client tries again (pytest would keep a session fixture's failure);
- fixture `larder_store`: a fresh store for each test, labelled
  RUN/PACKAGE/TEST (`item_label`: the run from --larder-run, $LARDER_RUN
  or the CI system's run id, else none and the label is PACKAGE/TEST; the
  test file as its node id names it; the rest of the node id) and made as
  the closest `@pytest.mark.larder(...)` says (template, fixtures, version,
  snapshot, build, ttl_seconds);
- hook `pytest_larder_build(client, config)`, for a conftest.py: builds
  the session's app-built template, typically
  ``return client.build("app-" + digest, migrate)``, and returns its key
  (or None). Called once per session (per xdist worker: `Client.build`
  makes sure only one of them builds it), the first time a `larder_store`
  needs a default; if it raises, that test errors with its traceback and
  the later ones fail at once;
- what a `larder_store` is made of, first that applies: the template or
  build its markers name (`template=None` or `build=None` there: neither,
  and no default); the build key from `pytest_larder_build`;
  --larder-template / $LARDER_TEMPLATE; else an empty store;
- in local mode over http://, work off the tests' critical path (see
  larder._ahead): the store of the test pytest runs next (its node id,
  label and options known from nextitem) is asked for as soon as the
  current test has its own, and the next test takes it made; a passing
  test's store is deleted in the background, its request sent with the
  next test's. The session's end (larder_client's teardown) deletes a
  store made ahead that no test took and waits for every answer; a delete
  that failed errors the teardown of the test during which its answer was
  read, naming the test whose store it was;
- after a passing test the store is deleted. After a failing one (its setup
  or call failed) it is kept (PATCH keep) and its artifact saved into
  --larder-artifacts / $LARDER_ARTIFACTS (default `larder-artifacts/`) as
  `<node id made file-safe>-<store id>.zip`. The test's report says where:
  a "larder" section shown under the failure, the user properties
  `larder_store` and `larder_artifact` (JUnit XML <property>), and a list at
  the end of the terminal summary;
- remote mode (--larder-mode / $LARDER_MODE, by default when the URL's host
  is not a loopback address): a store's `path` is a local copy. A failing
  test's copy is checked in before the store is kept (a check-in that fails
  is said in the "larder" section; the store is still kept with what was
  last checked in, and its artifact saved); a passing test's store is
  deleted without an upload. The local copy is removed either way;
- fixture `larder_check_snapshot`: a function that checks one old database
  (a snapshot the repository keeps) migrated by the application's own
  migrator, `Client.check_snapshot`, and fails the test with every failure
  when the check fails; the store is then kept and its artifact saved and
  reported like a failed `larder_store`'s; its store is labelled like a
  `larder_store`. Parametrize a test over a
  directory's snapshots with ``larder.snapshots(directory)``.

State lives on the config and the items only, never in module globals, so
each pytest-xdist worker is on its own.
"""
from __future__ import annotations

import os
import re
import sys
from typing import Any, Callable, Dict, Generator, Iterator, List, Optional, Tuple

import pytest

from ._ahead import Ahead, settle_hook
from ._client import Client, LarderError, Store, _reference, assert_passed, run_prefix, store_label
from ._up import start_server

MARKER_FIELDS = ("template", "fixtures", "version", "snapshot", "build", "ttl_seconds")

# Shared with the other clients (clients/defaults.json): where artifacts go
# when neither --larder-artifacts nor $LARDER_ARTIFACTS says, and the longest
# test name in an artifact's file name.
ARTIFACTS_DIR = "larder-artifacts"
ARTIFACT_NAME_MAX = 120

_reports_key = pytest.StashKey[Dict[str, Any]]()
# The stores kept for an item: (store id, artifact path).
_kept_key = pytest.StashKey[List[Tuple[str, str]]]()
# The session's build: (key or None, None), or (None, what to raise for every test).
_build_key = pytest.StashKey[Tuple[Optional[str], Optional[BaseException]]]()
# What went wrong on the way to keeping an item's store (a failed check-in).
_notes_key = pytest.StashKey[List[str]]()
# larder_client's last failure to find or start the server.
_no_server_key = pytest.StashKey[BaseException]()
# The session's requests off the critical path (None: remote mode, or https).
_ahead_key = pytest.StashKey[Optional[Ahead]]()
# The item pytest runs after this one (None: the last).
_next_key = pytest.StashKey[Optional[pytest.Item]]()
# pytest.skip() or pytest.fail() in the hook.
_OUTCOMES = (pytest.skip.Exception, pytest.fail.Exception)


class LarderHookSpecs:
    """The plugin's hook, for conftest.py files (registered by `pytest_addhooks`)."""

    @staticmethod
    @pytest.hookspec(firstresult=True)
    def pytest_larder_build(client: Client, config: pytest.Config) -> Optional[str]:
        """Builds the session's app-built template and returns its key: the
        `build` of every `larder_store` whose larder markers name neither a
        template nor a build. Typically
        ``return client.build("app-" + fingerprint_of_migrations, migrate)``
        (see `larder.Client.build`). None: no default build. `client` is
        the session's `larder_client`; an implementation may take only the
        arguments it needs. Called at most once per session, lazily."""


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(LarderHookSpecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("larder", "Larder stores for tests")
    group.addoption("--larder-url", default=None, metavar="URL",
                    help="Larder server to use (default: $LARDER_URL; with neither, the run's own server "
                         "is started by `larder up`); its token comes from $LARDER_TOKEN.")
    group.addoption("--larder-binary", default=None, metavar="PATH",
                    help="The larder binary that starts the run's server when no URL is given (default: "
                         "$LARDER_BINARY, else the one in this package, else larder on PATH).")
    group.addoption("--larder-fixtures", default=None, metavar="DIR",
                    help="Fixtures folder of the server started when no URL is given (default: "
                         "$LARDER_FIXTURES, else the first of fixtures/, tests/fixtures/, test/fixtures/, "
                         "testdata/fixtures/ from the working directory up to the project's top).")
    group.addoption("--larder-template", default=None, metavar="NAME",
                    help="Template of a larder_store whose larder marker names none, when no "
                         "pytest_larder_build hook gives a build (default: $LARDER_TEMPLATE; "
                         "without one, an empty store).")
    group.addoption("--larder-run", default=None, metavar="RUN",
                    help="The run every store's label starts with, RUN/PACKAGE/TEST, so that "
                         "DELETE /stores?label_prefix=RUN/ removes this run's stores, kept ones too (default: "
                         "$LARDER_RUN, else the CI system's run id: $GITHUB_RUN_ID, $CI_PIPELINE_ID, "
                         "$BUILDKITE_BUILD_ID, $BUILD_TAG or $CIRCLE_WORKFLOW_ID, each on its own CI system; "
                         "with none, labels are PACKAGE/TEST).")
    group.addoption("--larder-mode", default=None, choices=("remote", "local"),
                    help="remote: each store's path is a local copy of it, checked in when the test fails "
                         "(for a server whose files this machine cannot open); local: the server's own file "
                         "(default: $LARDER_MODE, else remote when the server's host is not a loopback address).")
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
    directory = _setting(config, "larder_artifacts", "LARDER_ARTIFACTS") or ARTIFACTS_DIR
    return os.path.join(str(config.invocation_params.dir), os.path.expanduser(directory))


def file_safe(name: str, limit: int = ARTIFACT_NAME_MAX) -> str:
    """A node id as a file name: runs of anything but letters, digits, `.`,
    `_` and `-` become one `_`; at most `limit` characters."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-")
    return safe[:limit].rstrip("._-") or "test"


def item_label(item: pytest.Item) -> str:
    """The label of a test's stores: RUN/PACKAGE/TEST, where RUN is
    --larder-run, else $LARDER_RUN, else the CI system's run id
    (`larder.run_prefix`; with none, the label is PACKAGE/TEST), PACKAGE
    the test file as the node id names it (relative to the rootdir:
    ``tests/test_gallery.py``) and TEST the rest of the node id
    (``TestSync::test_adds_album[param]``); at most `LABEL_MAX_BYTES`
    (UTF-8), cut keeping its start."""
    package, separator, test = item.nodeid.partition("::")
    if not separator:  # an item of a file with no name within it
        test = item.name
    return store_label(package, test, run_prefix(item.config.getoption("larder_run") or None))


def store_options(item: pytest.Item, client: Optional[Client] = None) -> Dict[str, Any]:
    """create_store arguments of an item: its larder markers, closest first,
    field by field (a field set to None there means "not this"), then, when
    none names a template or a build, the session's build (from the hook
    `pytest_larder_build`, asked only when `client` is given), else the
    default template."""
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
        build = session_build(item.config, client) if client is not None else None
        if build:
            options["build"] = build
        else:
            default = _setting(item.config, "larder_template", "LARDER_TEMPLATE")
            if default:
                options["template"] = default
    # version=None beside a snapshot keeps the snapshot as it was saved.
    return {key: value for key, value in options.items()
            if value is not None or (key == "version" and options.get("snapshot") is not None)}


def session_build(config: pytest.Config, client: Client) -> Optional[str]:
    """The key `pytest_larder_build` returns, asked once per session; None
    when no conftest implements it (or it returns None). If it raised, the
    first test to ask gets its error with the traceback, the later ones a
    short failure (a skip or failure of the hook's own: each the same)."""
    if _build_key not in config.stash:
        try:
            key = config.hook.pytest_larder_build(client=client, config=config)
        except _OUTCOMES as outcome:
            config.stash[_build_key] = (None, outcome)
            raise
        except Exception as error:
            config.stash[_build_key] = (None, pytest.fail.Exception(
                "larder_store: the session's build failed: pytest_larder_build raised %r "
                "(the traceback is under the first test that asked for it)" % (error,), pytrace=False))
            raise
        if key is not None and not isinstance(key, str):
            config.stash[_build_key] = (None, pytest.fail.Exception(
                "larder_store: pytest_larder_build returned %r, not a build key (str) or None" % (key,), pytrace=False))
        else:
            config.stash[_build_key] = (key or None, None)
    key, failure = config.stash[_build_key]
    if failure is not None:
        raise failure
    return key


def server_url(config: pytest.Config) -> str:
    """The server of this session: --larder-url / $LARDER_URL, else the
    run's shared server, which `larder up` starts when none runs (in the
    directory pytest was started from, serving this process and, in a
    pytest-xdist worker, the controller: every worker of a run shares it).
    Raises `LarderError` when there is neither a URL nor a binary, or when
    `larder up` fails."""
    url = _setting(config, "larder_url", "LARDER_URL")
    if url:
        return url
    # In an xdist worker (`workerinput`), the parent is the controller, which lives for the whole run.
    runner = os.getppid() if hasattr(config, "workerinput") else None
    return start_server(binary=config.getoption("larder_binary") or None,
                        fixtures=_setting(config, "larder_fixtures", "LARDER_FIXTURES"),
                        runner_pid=runner, cwd=str(config.invocation_params.dir))


@pytest.fixture(scope="session")
def larder_client(pytestconfig: pytest.Config) -> Iterator[Client]:
    """The Larder client of this session (of this worker, under xdist)."""
    failure: Optional[str]
    try:
        url = server_url(pytestconfig)
    except LarderError as error:
        failure = error.message
    else:
        failure = None
    if failure is not None:
        no_server = pytest.fail.Exception(failure, pytrace=False)
        pytestconfig.stash[_no_server_key] = no_server
        raise no_server
    try:
        client = Client(url=url, mode=pytestconfig.getoption("larder_mode") or None)
    except ValueError as error:  # $LARDER_MODE is neither remote nor local
        raise pytest.fail.Exception("larder_client: %s" % error, pytrace=False) from None
    ahead = Ahead(client) if Ahead.usable(client) else None
    pytestconfig.stash[_ahead_key] = ahead
    if ahead is not None:
        client._settle = settle_hook(ahead)
    yield client
    # The session's end, before a server `larder up` started for it can go:
    # the store made ahead that no test took is deleted, and every request
    # still unanswered waited for; what failed errors the last test.
    failures = []
    if ahead is not None:
        client._settle = None
        ahead.finish()
        failures = ahead.take_failures()
    client.close()
    if failures:
        _fail_background(failures)


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: Any, request: pytest.FixtureRequest) -> Generator[None, Any, None]:
    outcome = yield
    # pytest keeps a session fixture's failure and raises it for every later
    # test; forgotten, the next test that needs the server runs `larder up` again.
    if outcome.excinfo is not None and outcome.excinfo[1] is request.config.stash.get(_no_server_key, None):
        fixturedef.cached_result = None
        del request.config.stash[_no_server_key]


@pytest.fixture
def larder_store(request: pytest.FixtureRequest, larder_client: Client) -> Iterator[Store]:
    """A fresh store for this test; deleted after a pass, kept with its
    artifact saved after a failure (remote mode: its local copy checked in
    first; the local copy removed either way)."""
    item = request.node
    options = store_options(item, larder_client)
    label = item_label(item)
    ahead = request.config.stash.get(_ahead_key, None)
    store: Optional[Store] = None
    if ahead is not None:
        store = ahead.take((item.nodeid, label, options))
    failure: Optional[str] = None
    if store is None:
        try:
            store = larder_client.create_store(label=label, **options)
        except LarderError as error:
            failure = "larder_store: no store from %s with %r: %s" % (larder_client.url, options, error)
    if failure is not None:
        pytest.fail(failure, pytrace=False)
    assert store is not None
    if ahead is not None:
        _prepare_next(item, larder_client, ahead)
    yield store
    reports = item.stash.get(_reports_key, {})
    failed = any(report.failed for when, report in reports.items() if when in ("setup", "call"))
    try:
        if failed:
            _keep(item, store)
        elif ahead is not None:
            # Sent with the next test's request for a store (when it takes one),
            # answered later: a failure is reported then, naming this test.
            ahead.delete(store.id, "the store of %s, which passed" % item.nodeid)
            following = item.stash.get(_next_key, None)
            if following is None or "larder_store" not in getattr(following, "fixturenames", ()):
                ahead.flush()
        else:
            try:
                store.delete()  # remote mode: no upload, what the test did is not wanted
            except LarderError as error:
                if error.code != "store_not_found":  # the test deleted it itself
                    raise
    finally:
        store.close()  # remote mode: the local copy goes
    if ahead is not None:
        failures = ahead.take_failures()
        if failures:
            _fail_background(failures)


def _prepare_next(item: pytest.Item, client: Client, ahead: Ahead) -> None:
    """Asks for the store of the test pytest runs next, when it takes a
    `larder_store`, so that the server makes it while this test runs."""
    following = item.stash.get(_next_key, None)
    if following is None or "larder_store" not in getattr(following, "fixturenames", ()):
        return
    try:
        # The session's build is asked for by the test that first needs it, not ahead of it.
        options = store_options(following, client if _build_key in item.config.stash else None)
        label = item_label(following)
    except (Exception, *_OUTCOMES):  # the test meets its own error when it runs
        return
    ahead.prepare(following.nodeid, (following.nodeid, label, options), dict(options, label=label))


def _fail_background(failures: List[str]) -> None:
    raise pytest.fail.Exception("larder: a request made in the background failed:\n" + "\n".join(failures),
                                pytrace=False)


def _keep(item: pytest.Item, store: Store) -> None:
    # Remote mode: what the test did to its copy goes to the server first,
    # so that the kept store, its diff and its artifact show it.
    if store.remote:
        problem = None
        try:
            store.check_in()
        except LarderError as error:
            if error.code == "store_not_found":  # the test deleted it itself: nothing to keep
                return
            problem = str(error)
        except OSError as error:  # the copy is gone or unreadable
            problem = "%s: %s" % (type(error).__name__, error)
        if problem is not None:
            item.stash.setdefault(_notes_key, []).append(
                "store %s: the check-in of its local copy failed (%s); it is kept with what was last "
                "checked in" % (store.id, problem))
    try:
        store.keep()
    except LarderError as error:
        if error.code == "store_not_found":  # the test deleted it itself: nothing to keep
            return
        raise
    _record_kept(item, store)


def _record_kept(item: pytest.Item, store: Store) -> None:
    """Saves a kept store's artifact and says so in the item's report."""
    path = os.path.join(artifacts_dir(item.config), "%s-%s.zip" % (file_safe(item.nodeid), store.id))
    store.artifact(path)
    item.user_properties.append(("larder_store", store.id))
    item.user_properties.append(("larder_artifact", path))
    item.stash.setdefault(_kept_key, []).append((store.id, path))


@pytest.fixture
def larder_check_snapshot(request: pytest.FixtureRequest,
                          larder_client: Client) -> Callable[..., Dict[str, Any]]:
    """``check(path, *, migrate, build=None, template=None, version="latest",
    store=None, expect=None, data=True)``: `larder.Client.check_snapshot`
    with the session's client, the store labelled as a `larder_store` is
    (`item_label`).
    Returns the result when the check passed; fails the test with
    `larder.SnapshotCheckFailed` (the snapshot, its versions, every failure)
    when it did not, the store kept and its artifact saved like a failed
    `larder_store`'s. With neither `build`, `template` nor `store`, the
    reference is the session's build (`pytest_larder_build`), else
    --larder-template."""
    item = request.node

    def kept(store: Store) -> None:
        try:
            _record_kept(item, store)
        except LarderError as error:  # the check's failure is the one to report
            item.user_properties.append(("larder_store", store.id))
            item.user_properties.append(("larder_artifact", "not saved: %s" % error))
            item.stash.setdefault(_kept_key, []).append((store.id, "not saved: %s" % error))

    def check(path: Any, *, migrate: Any, build: Optional[str] = None, template: Optional[str] = None,
              version: Optional[str] = "latest", store: Any = None, expect: Optional[Dict[str, Any]] = None,
              data: bool = True) -> Dict[str, Any]:
        __tracebackhide__ = True
        if build is None and template is None and store is None:
            build = session_build(item.config, larder_client)
            if build is None:
                template = _setting(item.config, "larder_template", "LARDER_TEMPLATE")
            if build is None and template is None:
                pytest.fail("larder_check_snapshot: nothing to check against: pass build=, template= or store=, "
                            "or return a build key from pytest_larder_build", pytrace=False)
        against = _reference(build, template, version, store)
        result = larder_client._check_snapshot(path, migrate, against, expect, data, item_label(item), kept=kept)
        return assert_passed(result)

    return check


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Optional[pytest.Item]) -> None:
    item.stash[_next_key] = nextitem  # larder_store makes the next test's store while this one runs


def pytest_sessionfinish(session: pytest.Session) -> None:
    # Where larder_client's own end did not come (an interrupted run): the
    # same clean-up, its failures said on the terminal.
    ahead = session.config.stash.get(_ahead_key, None)
    if ahead is None or ahead.finished:
        return
    ahead.client._settle = None
    ahead.finish()
    failures = ahead.take_failures()
    if failures:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        text = "larder: a request made in the background failed:\n" + "\n".join(failures)
        if reporter is not None:
            reporter.write_line(text)
        else:
            sys.stderr.write(text + "\n")
        if session.exitstatus == 0:
            session.exitstatus = 1


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    item.stash.setdefault(_reports_key, {})[report.when] = report
    notes = item.stash.get(_notes_key, None)
    kept = item.stash.get(_kept_key, None)
    if report.when == "teardown" and (kept or notes):
        # A section whose title says "teardown" is printed under the test's
        # failure in the summary, by pytest and by xdist's controller alike.
        lines = list(notes or [])
        lines += ["store %s kept; artifact: %s" % (store_id, path) for store_id, path in kept or []]
        report.sections.append(("larder (teardown)", "\n".join(lines)))


class _Summary:
    """Lists the kept stores at the end of the terminal summary (on the
    xdist controller too: it reads the reports the workers send)."""

    def __init__(self) -> None:
        self.kept: List[Tuple[str, str, str]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        stores = [str(value) for name, value in report.user_properties if name == "larder_store"]
        artifacts = [str(value) for name, value in report.user_properties if name == "larder_artifact"]
        for store_id, path in zip(stores, artifacts):
            self.kept.append((report.nodeid, store_id, path))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.kept:
            return
        terminalreporter.section("larder: stores kept after failures")
        for nodeid, store_id, path in self.kept:
            terminalreporter.write_line("%s: store %s, artifact %s" % (nodeid, store_id, path))
