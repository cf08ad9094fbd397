"""The HTTP client: `Client`, `Store` and the errors, standard library only.

Every method is one request of the contract (the server's `GET /openapi.json`
describes each; the repository's docs/api.md shows them), except
`Client.build`, which makes the requests of an app-built template's whole
dance (claim, migrate, finish or discard; or wait), and
`Client.check_snapshot`, which uploads an old database, has the
application's own migrator migrate it and asks the server to judge it. A
`Client` keeps one keep-alive connection per thread, so a store may be
written from one thread while another waits on its counts.

In remote mode (`Client(mode="remote")`, $LARDER_MODE, or by default when
the server's host is not a loopback address) a store's `path` is a local
copy of it, downloaded (GET /stores/{id}/database) and handed back with
`Store.check_in` (PUT /stores/{id}/database): for tests that cannot open the
server's files.
"""
from __future__ import annotations

import http.client
import ipaddress
import json
import os
import shutil
import socket
import tempfile
import threading
import time
import traceback
import urllib.parse
import weakref
import zipfile
from typing import IO, Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union, cast

__all__ = ["Client", "Store", "LarderError", "Timeout", "SnapshotCheckFailed", "DEFAULT_URL",
           "assert_passed", "check_snapshots", "snapshot_files", "run_prefix", "store_label"]

DEFAULT_URL = "http://127.0.0.1:7464"

# The defaults every client shares (clients/defaults.json; tests/test_defaults.py
# checks that these agree with it).

# Socket time limit of a request (fixture loads and migrations may run for
# the server's operation limit, 60 s by default); a request the server holds
# for a wait gets its own timeout_ms on top. A download (artifact, database)
# gets DOWNLOAD_TIMEOUT, or the client's timeout when that is longer.
DEFAULT_TIMEOUT = 120.0
DOWNLOAD_TIMEOUT = 300.0

# The server's default wait: a count wait's, and how long POST /stores
# {"build": ...} waits server-side for a build under way when the body says
# nothing. How long `build` waits in all for another caller's build, and the
# longest single long poll of it.
WAIT_TIMEOUT_MS = 30000
BUILD_TIMEOUT_MS = 300000
BUILD_POLL_MS = 30000

# How many times `build` asks to finish a build while the server answers 409
# `conflict` (a connection of the migrator still writing), pausing as
# Retry-After says (seconds; this when it says nothing, at most the maximum).
FINISH_ATTEMPTS = 5
RETRY_AFTER_DEFAULT = 1.0
RETRY_AFTER_MAX = 10.0

# A test helper's labels, RUN/PACKAGE/TEST (clients/README.md, "How a test
# helper labels its stores"): where RUN comes from when the caller names
# none, the first (variable, only when this one is set too) pair whose
# variables are both non-empty ("": no condition); and the longest label the
# server takes, in UTF-8 bytes.
RUN_VARIABLES: Tuple[Tuple[str, str], ...] = (
    ("LARDER_RUN", ""),
    ("GITHUB_RUN_ID", "GITHUB_ACTIONS"),
    ("CI_PIPELINE_ID", "GITLAB_CI"),
    ("BUILDKITE_BUILD_ID", "BUILDKITE"),
    ("BUILD_TAG", "JENKINS_URL"),
    ("CIRCLE_WORKFLOW_ID", "CIRCLECI"),
)
LABEL_MAX_BYTES = 256

_USER_AGENT = "larder-python/0.1.0"

# Remote mode: the modes, the variable that names one, and where a store's
# local copy lives (a private folder of its own, tempfile.mkdtemp's 0700).
MODES = ("local", "remote")
MODE_VARIABLE = "LARDER_MODE"
REMOTE_FOLDER_PREFIX = "larder-remote-"
LOCAL_NAME = "store.sqlite"
SQLITE_TYPE = "application/vnd.sqlite3"
ZIP_TYPE = "application/zip"


def is_loopback(host: str) -> bool:
    """Whether `host` (a URL's host, without brackets) is a loopback address:
    ``localhost``, 127.0.0.0/8 or ``::1``."""
    host = host.lower()
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if address.version == 4:
        return address in ipaddress.ip_network("127.0.0.0/8")
    return address == ipaddress.IPv6Address("::1")


def resolve_mode(mode: Optional[str], url: str, environ: Optional[Mapping[str, str]] = None) -> str:
    """``"local"`` or ``"remote"``: `mode` when given, else $LARDER_MODE
    (when set and not empty), else remote when `url`'s host is not a
    loopback address and local when it is. Any other value is a
    `ValueError` naming where it came from and the two values.
    `environ` defaults to `os.environ`."""
    if mode is not None:
        if mode not in MODES:
            raise ValueError("a Larder client's mode is 'remote' or 'local', not %r" % (mode,))
        return mode
    environ = os.environ if environ is None else environ
    value = environ.get(MODE_VARIABLE)
    if value:
        if value not in MODES:
            raise ValueError("%s is %r: set it to 'remote' or 'local' (or leave it unset)" % (MODE_VARIABLE, value))
        return value
    host = urllib.parse.urlsplit(url).hostname or ""
    return "local" if is_loopback(host) else "remote"


def run_prefix(run: Optional[str] = None, environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The run a test helper's labels start with: `run` when given (not
    empty), else the value of the first of `RUN_VARIABLES` that is set and
    non-empty while its condition variable is too ($LARDER_RUN, else the CI
    system's run id), else None. `environ` defaults to `os.environ`."""
    if run:
        return run
    environ = os.environ if environ is None else environ
    for variable, condition in RUN_VARIABLES:
        value = environ.get(variable)
        if value and (not condition or environ.get(condition)):
            return value
    return None


def store_label(package: str, test: str, run: Optional[str] = None) -> str:
    """A test's store label: ``RUN/PACKAGE/TEST``, or ``PACKAGE/TEST`` when
    `run` is None or empty (`run_prefix()` gives it), cut to
    `LABEL_MAX_BYTES` of UTF-8 at a character boundary, keeping its start.
    For pytest, PACKAGE is the test file as the node id names it and TEST
    the rest of the node id: ``store_label("tests/test_a.py", "TestB::test_c")``."""
    label = "%s/%s" % (package, test)
    if run:
        label = "%s/%s" % (run, label)
    data = label.encode("utf-8")
    if len(data) <= LABEL_MAX_BYTES:
        return label
    # Cut inside a character, its partial bytes are all that does not decode.
    return data[:LABEL_MAX_BYTES].decode("utf-8", "ignore")


class LarderError(Exception):
    """An answer that is not 2xx, or a server that cannot be reached.

    `status` is the HTTP status (0 when no answer came: then `code` is
    ``"unreachable"``), `code` the contract's error code (``"store_not_found"``,
    ``"unknown_template"``, ...), `message` the server's words and `details`
    its dict of details. `request_id` is the server's X-Request-Id (to find
    the request in its log) and `retry_after` the seconds a 409 asks to wait.
    """

    def __init__(self, status: int, code: str, message: str, details: Optional[Dict[str, Any]] = None,
                 request_id: Optional[str] = None, retry_after: Optional[float] = None):
        super().__init__(status, code, message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details if details is not None else {}
        self.request_id = request_id
        self.retry_after = retry_after

    def __reduce__(self) -> Any:
        return (type(self), (self.status, self.code, self.message, self.details, self.request_id, self.retry_after))

    def __str__(self) -> str:
        if self.status:
            return "%d %s: %s" % (self.status, self.code, self.message)
        return "%s: %s" % (self.code, self.message)

    def __repr__(self) -> str:
        return "%s(status=%r, code=%r, message=%r)" % (type(self).__name__, self.status, self.code, self.message)


class Timeout(LarderError):
    """408 `timeout`: a wait whose condition did not hold in time (or a query
    that ran past its limit). `counts` are the last counts the server saw
    (``{}`` when the answer has none)."""

    @property
    def counts(self) -> Dict[str, int]:
        counts = self.details.get("counts")
        return counts if isinstance(counts, dict) else {}


class SnapshotCheckFailed(AssertionError):
    """A snapshot check that did not pass (see `assert_passed`). `result` is
    the check's result; the message names the snapshot, its versions, the
    reference, each failure on a line of its own and the kept store."""

    def __init__(self, result: Dict[str, Any]):
        super().__init__(describe_failure(result))
        self.result = result

    def __reduce__(self) -> Any:
        return (type(self), (self.result,))


def _error_from(status: int, reason: str, headers: http.client.HTTPMessage, payload: bytes) -> LarderError:
    code, message = "http_error", ""
    details: Dict[str, Any] = {}
    try:
        error = json.loads(payload.decode("utf-8"))["error"]
        code = str(error.get("code") or code)
        message = str(error.get("message") or "")
        details = error.get("details") if isinstance(error.get("details"), dict) else {}
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
        # Not Larder's error body (a proxy in between, say): keep what it said.
        message = payload[:500].decode("utf-8", "replace").strip()
    if not message:
        message = reason or "HTTP %d" % status
    retry_after = None
    if headers.get("Retry-After"):
        try:
            retry_after = float(headers["Retry-After"])
        except ValueError:
            pass
    cls = Timeout if status == 408 or code == "timeout" else LarderError
    return cls(status, code, message, details, request_id=headers.get("X-Request-Id"), retry_after=retry_after)


def _names(value: Union[str, Iterable[str], None]) -> Optional[List[str]]:
    """A name or names as the list the server takes (a lone string is one name)."""
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


class Client:
    """A Larder server. `url` defaults to $LARDER_URL, then
    http://127.0.0.1:7464; `token` to $LARDER_TOKEN (sent as a Bearer token
    when set). `timeout` is the socket time limit of one request, in seconds.

    `mode` is ``"local"`` (a store's `path` is the server's own file) or
    ``"remote"`` (a store's `path` is a local copy, handed back with
    `Store.check_in`); by default $LARDER_MODE, else remote when the URL's
    host is not a loopback address (``localhost``, 127.0.0.0/8, ``::1``)
    and local when it is (`resolve_mode`). Another value is a `ValueError`.
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *, timeout: float = DEFAULT_TIMEOUT,
                 mode: Optional[str] = None):
        self.url = (url or os.environ.get("LARDER_URL") or DEFAULT_URL).rstrip("/")
        self.token = token if token is not None else (os.environ.get("LARDER_TOKEN") or None)
        self.timeout = timeout
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("a Larder URL is http(s)://HOST[:PORT][/PREFIX], not %r" % self.url)
        self.mode = resolve_mode(mode, self.url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self._local = threading.local()
        self._lock = threading.Lock()
        # Every thread's connection, with its thread, to close them all.
        self._connections: List[Tuple[threading.Thread, http.client.HTTPConnection]] = []
        self._generation = 0
        # Called before each request: the pytest plugin's, which first waits
        # for the deletes it sent in the background (larder._ahead).
        self._settle: Optional[Callable[[], None]] = None

    def __repr__(self) -> str:
        return "larder.Client(%r, mode=%r)" % (self.url, self.mode)

    @property
    def remote(self) -> bool:
        """Whether this client works in remote mode (`mode` is ``"remote"``)."""
        return self.mode == "remote"

    @classmethod
    def for_tests(cls, url: Optional[str] = None, token: Optional[str] = None, *,
                  binary: Union[str, "os.PathLike[str]", None] = None,
                  fixtures: Union[str, "os.PathLike[str]", None] = None, runner_pid: Optional[int] = None,
                  cwd: Union[str, "os.PathLike[str]", None] = None, timeout: float = DEFAULT_TIMEOUT,
                  mode: Optional[str] = None) -> "Client":
        """A client for a test run outside pytest (unittest, a script), found
        as every Larder test helper finds its server: `url`, else
        $LARDER_URL, else the run's shared server, started when none runs
        (`larder.start_server(binary=..., fixtures=..., runner_pid=...,
        cwd=...)`: `larder up` with the binary given, $LARDER_BINARY, the
        one shipped in this package or `larder` on PATH). It serves this
        process and `runner_pid`, and stops by itself a second after they
        have ended. No URL and no binary: `LarderError` (code
        ``"no_server"``) saying both ways out. `mode` as for `Client` (a
        server started here is on loopback: local unless $LARDER_MODE or
        `mode` says remote)."""
        from ._up import url_for_tests

        resolve_mode(mode, url or os.environ.get("LARDER_URL") or DEFAULT_URL)  # a bad mode fails before a server starts
        url = url_for_tests(url, binary=binary, fixtures=fixtures, runner_pid=runner_pid, cwd=cwd)
        return cls(url=url, token=token, timeout=timeout, mode=mode)

    # --- the API ---------------------------------------------------------------

    def create_store(self, template: Optional[str] = None, fixtures: Union[str, Sequence[str], None] = None,
                     version: Any = "latest", snapshot: Optional[str] = None, label: Optional[str] = None,
                     build: Optional[str] = None, from_store: Union[str, "Store", None] = None, *,
                     ttl_seconds: Optional[int] = None, timeout_ms: Optional[int] = None) -> "Store":
        """POST /stores: a new store. Only the arguments given are sent: no
        argument at all gives an empty store. `version` is the version to
        migrate to ("latest" unless said, sent only with a template);
        `version=None` sends `"version": null`, which keeps a `snapshot` as
        it was saved. `from_store` (a store or its
        id) forks a live store; `build` copies an app-built template (see
        `build`), waiting server-side while it is still being built, up to
        `timeout_ms` (the server's default 30000; only with `build`), then
        `larder.Timeout`. In remote mode the new store is downloaded into a
        local copy, its `path` (when that fails, the store is deleted)."""
        body, limit = self._create_body(template, fixtures, version, snapshot, label, build, from_store,
                                        ttl_seconds=ttl_seconds, timeout_ms=timeout_ms)
        return self._new_store(self._call("POST", "/stores", body=body, timeout=limit))

    def _create_body(self, template: Optional[str] = None, fixtures: Union[str, Sequence[str], None] = None,
                     version: Any = "latest", snapshot: Optional[str] = None, label: Optional[str] = None,
                     build: Optional[str] = None, from_store: Union[str, "Store", None] = None, *,
                     ttl_seconds: Optional[int] = None, timeout_ms: Optional[int] = None,
                     ) -> Tuple[Dict[str, Any], Optional[float]]:
        """`create_store`'s POST /stores body, and its time limit (None: the client's)."""
        body: Dict[str, Any] = {}
        if template is not None:
            body["template"] = template
        if version is None:
            body["version"] = None
        elif version != "latest":
            body["version"] = str(version)
        if snapshot is not None:
            body["snapshot"] = snapshot
        if fixtures is not None:
            body["fixtures"] = _names(fixtures)
        if label is not None:
            body["label"] = label
        if build is not None:
            body["build"] = build
        if from_store is not None:
            body["from"] = from_store.id if isinstance(from_store, Store) else from_store
        if ttl_seconds is not None:
            body["ttl_seconds"] = ttl_seconds
        if timeout_ms is not None:
            body["timeout_ms"] = int(timeout_ms)
        limit = None
        if build is not None:
            # The server may wait for the build before it copies it.
            wait = int(timeout_ms) if timeout_ms is not None else WAIT_TIMEOUT_MS
            limit = wait / 1000.0 + self.timeout
        return body, limit

    def upload(self, database: Union[str, "os.PathLike[str]", bytes], *, template: Optional[str] = None,
               version: Any = "latest", label: Optional[str] = None, ttl_seconds: Optional[int] = None) -> "Store":
        """POST /stores with a SQLite database file as the body
        (`application/vnd.sqlite3`): a store holding that database.
        `database` is the file's path, or its bytes. With no `template` the
        store keeps the file as it is (what `check` needs); with one it is
        migrated to `version` ("latest"; None: kept as it is). In remote
        mode the store is downloaded into a local copy, as `create_store`'s."""
        query: Dict[str, Any] = {"label": label, "ttl_seconds": ttl_seconds}
        if template is not None:
            query["template"] = template
            if version is None:
                query["version"] = ""
            elif version != "latest":
                query["version"] = str(version)
        if isinstance(database, (bytes, bytearray)):
            return self._new_store(self._call("POST", "/stores", query=query, raw=bytes(database)))
        with open(os.fspath(database), "rb") as file:
            info = self._call("POST", "/stores", query=query, raw=file)
        return self._new_store(info)

    def _new_store(self, info: Dict[str, Any]) -> "Store":
        """A store just made; in remote mode, with its local copy (a store
        whose copy cannot be made is deleted: no one would delete it)."""
        store = Store(self, info)
        if store.remote:
            try:
                store.check_out()
            except BaseException:
                _delete_quietly(store)
                raise
        return store

    def delete_stores(self, *, label: Optional[str] = None, label_prefix: Optional[str] = None) -> int:
        """DELETE /stores?label=...&label_prefix=...: removes every store
        whose label is `label` or starts with `label_prefix`, kept ones
        too, and answers how many. ``delete_stores(label_prefix=RUN + "/")``
        removes one run's stores (a test helper labels them RUN/PACKAGE/TEST).
        Naming neither is a `ValueError`."""
        if not label and not label_prefix:
            raise ValueError("delete_stores: say which stores: label= or label_prefix= (not empty)")
        answer = self._call("DELETE", "/stores", query={"label": label or None, "label_prefix": label_prefix or None})
        return int(answer["deleted"])

    def store(self, store_id: str) -> "Store":
        """GET /stores/{id}: a store that exists already (404 `store_not_found`
        if not). In remote mode its local copy is downloaded the first time
        its `path` is asked for (or `check_out()` is called)."""
        return Store(self, self._call("GET", "/stores/" + _segment(store_id)))

    get_store = store

    def health(self) -> Dict[str, Any]:
        """GET /health."""
        return cast(Dict[str, Any], self._call("GET", "/health"))

    # --- checks of what the app's own migrator made -----------------------------

    def check(self, store: Union[str, "Store"], against: Dict[str, Any], snapshot: Optional[str] = None,
              expect: Optional[Dict[str, Any]] = None, data: bool = True) -> Dict[str, Any]:
        """POST /stores/{id}/check: judges `store` (a `Store` or its id), an
        upload that the application's own migrator has migrated, against a
        reference: ``{"build": KEY}``, ``{"template": NAME, "version":
        "latest"}`` or ``{"store": ID}``. `snapshot` names it in the result;
        `expect` is the `.expect.json` shape (`version`, `counts`,
        `min_counts`, `assert`, `before` on the upload as it arrived,
        `drops`, `moves`, `deletes`); `data=False` skips the check that
        every table and column that held data still does.

        Returns the result, passed or not (200 or 422): ``{"kind": "app",
        "snapshot", "from_version", "to_version", "passed", "ms",
        "failures": [...], "notes": [...]}``. What cannot be judged raises
        `LarderError`: 400 `bad_request` (details ``reason`` `not_an_upload`
        for a store that was not uploaded), 404 `unknown_build`,
        `unknown_template`, `unknown_version`, `store_not_found`, 409 while
        the build is still building."""
        body: Dict[str, Any] = {"against": dict(against)}
        if snapshot is not None:
            body["snapshot"] = snapshot
        if expect is not None:
            body["expect"] = expect
        if not data:
            body["data"] = False
        store_id = store.id if isinstance(store, Store) else store
        answer = self._exchange("POST", "/stores/" + _segment(store_id) + "/check", body=body, results=(422,))[1]
        return cast(Dict[str, Any], answer)

    def check_snapshot(self, path: Union[str, "os.PathLike[str]"], *, migrate: Callable[[str], Any],
                       build: Optional[str] = None, template: Optional[str] = None, version: Optional[str] = "latest",
                       store: Union[str, "Store", None] = None, expect: Optional[Dict[str, Any]] = None,
                       data: bool = True, label: Optional[str] = None) -> Dict[str, Any]:
        """Checks that the application's own migrator migrates the old
        database `path` (a snapshot kept in the repository) correctly:
        uploads it as it is, calls ``migrate(store_path)`` (a `str`; commit
        and close connections before returning; in remote mode the path of
        the store's local copy, checked in once `migrate` returns), then
        `check` against the reference, exactly one of `build` (a key, see `build`), `template`
        (at `version`) or `store` (a `Store` or id).

        `expect` defaults to ``NAME.expect.json`` beside the file (NAME: the
        file name less ``.sqlite``), when there is one; ``expect={}`` ignores
        it. The store is labelled `label` (default: the file name).

        Returns the result (see `check`), its ``snapshot`` the file name,
        plus ``against`` (the reference) and ``kept_store``: None when it
        passed (the store is deleted), else the id of the store, kept
        (PATCH keep) with what the migrator made of it, to download
        (``client.store(id).database(path)``) and delete by hand. When
        `migrate` raises, the store is kept too and the exception
        propagates. `larder.assert_passed(result)` raises
        `SnapshotCheckFailed` for a failed result."""
        __tracebackhide__ = True  # pytest: a migrator's traceback starts at the caller
        return self._check_snapshot(path, migrate, _reference(build, template, version, store), expect, data, label)

    def check_snapshots(self, directory: Union[str, "os.PathLike[str]"], *, migrate: Callable[[str], Any],
                        build: Optional[str] = None, template: Optional[str] = None, version: Optional[str] = "latest",
                        store: Union[str, "Store", None] = None, data: bool = True) -> List[Dict[str, Any]]:
        """`check_snapshot` of every ``*.sqlite`` file in `directory`, in
        name order, each with its own ``.expect.json``: their results. A
        migrator that raises fails that snapshot's result (its failure says
        what it raised, ``traceback`` holds the traceback, its store is kept)
        and the others are still checked. A directory without snapshots is
        a `ValueError`: nothing checked is not a pass."""
        against = _reference(build, template, version, store)
        return [self._check_snapshot(path, migrate, against, None, data, None, capture=True)
                for path in snapshot_files(directory)]

    def _check_snapshot(self, path: Union[str, "os.PathLike[str]"], migrate: Callable[[str], Any],
                        against: Dict[str, Any], expect: Optional[Dict[str, Any]], data: bool, label: Optional[str],
                        kept: Optional[Callable[["Store"], None]] = None, capture: bool = False) -> Dict[str, Any]:
        """The steps of `check_snapshot`; `kept(store)` is called for a store
        that is kept. An `Exception` of the migrator propagates, or with
        `capture` is a failed result."""
        __tracebackhide__ = True
        path = os.fspath(path)
        name = os.path.basename(path)
        if expect is None:
            expect = expectations_of(path)
        # In remote mode: a local copy, which the migrator migrates and which
        # goes back before the check; removed (close) whatever happens.
        uploaded = self.upload(path, label=label if label is not None else name)
        try:
            try:
                migrate(uploaded.path)
            except Exception as error:
                self._keep_quietly(uploaded, kept)
                note = "larder: the migrator raised on snapshot %s; its store %s is kept" % (name, uploaded.id)
                if hasattr(error, "add_note"):  # Python 3.11
                    error.add_note(note)
                if not capture:
                    raise
                return {"template": None, "kind": "app", "snapshot": name, "from_version": None, "to_version": None,
                        "passed": False, "ms": 0, "failures": ["the migrator raised %s" % _one_line(error)],
                        "notes": [], "against": against, "kept_store": uploaded.id,
                        "traceback": "".join(traceback.format_exception(type(error), error, error.__traceback__))}
            # (KeyboardInterrupt and the like leave the store to its ttl.)
            try:
                uploaded.check_in()  # remote mode: what the migrator made goes back (locally: nothing to do)
                result = self.check(uploaded, against, snapshot=name, expect=expect, data=data)
            except BaseException:
                _delete_quietly(uploaded)  # nothing was judged: nothing to look at
                raise
            result["against"] = against
            if result.get("passed"):
                result["kept_store"] = None
                uploaded.delete()
            else:
                uploaded.keep()
                result["kept_store"] = uploaded.id
                if kept is not None:
                    kept(uploaded)
            return result
        finally:
            uploaded.close()

    @staticmethod
    def _keep_quietly(store: "Store", kept: Optional[Callable[["Store"], None]]) -> None:
        try:
            # Remote mode: what the migrator left goes back, to look at (best
            # effort: the migrator's error is the one to report).
            try:
                store.check_in()
            except Exception:
                pass
            store.keep()
            if kept is not None:
                kept(store)
        except Exception:
            pass  # the migrator's error is the one to report

    # --- app-built templates -------------------------------------------------------

    def build(self, key: str, migrate: Callable[[str], Any], label: Optional[str] = None,
              timeout_ms: int = BUILD_TIMEOUT_MS) -> str:
        """Makes sure the app-built template `key` is ready, built once by
        whichever caller comes first; returns `key`, for
        ``create_store(build=key)``. `key` is your fingerprint of what goes
        into the template (a hash of the migration files, say):
        ``[A-Za-z0-9._-]{1,128}``.

        POST /builds claims the key. Already built (200): done. This caller
        builds (201): ``migrate(path)`` is called with the path of an empty
        SQLite file, runs the application's own migrator (and fixtures) on
        it, commits and closes its connections; then POST
        /builds/{key}/finish makes it ready. When `migrate` raises, or the
        server refuses to finish (409 a write transaction still open, asked
        `FINISH_ATTEMPTS` times Retry-After apart; 422 a file that fails
        integrity_check), the build is discarded (DELETE /builds/{key}) and
        the error propagates. Another caller builds it
        (202): this one long polls GET /builds/{key}?wait=ready until it is
        ready; if that builder fails meanwhile (or its lease runs out), this
        one claims the key again and may build it itself.

        Raises `larder.Timeout` when the build is not ready within
        `timeout_ms` (a migrate of this caller's own is not cut short). In
        remote mode a build that this caller would make is handed back and
        `LarderError` (code ``"remote_mode"``) raised: its migrator would
        write the server's file; a build made by another is used as ever."""
        deadline = time.monotonic() + int(timeout_ms) / 1000.0
        body: Dict[str, Any] = {"key": key}
        if label is not None:
            body["label"] = label
        while True:
            status, answer = self._exchange("POST", "/builds", body=body)
            if status == 201 and self.remote:
                # The migrator would write the server's file: hand the claim back.
                self._discard_quietly(key)
                raise LarderError(0, "remote_mode", "build %s: in remote mode this client cannot build (the migrator would run on "
                                  "the server's file %s); build it from a client on the server's machine, or check against a "
                                  "template or an uploaded store" % (key, answer.get("path")))
            if status == 201:
                self._make_build(key, answer["path"], migrate)
                return key
            if status != 202:  # 200: ready
                return key
            if self._await_build(key, deadline, int(timeout_ms)):
                return key
            # Its builder failed: claim it again (this caller may build it now).

    def builds(self) -> List[Dict[str, Any]]:
        """GET /builds: every build, ready or under way."""
        return cast(List[Dict[str, Any]], self._call("GET", "/builds")["builds"])

    def build_info(self, key: str) -> Dict[str, Any]:
        """GET /builds/{key}: ``{"key", "state": "building" | "ready", "label",
        "started_at", "finished_at", "counts", "size_bytes", ...}`` (404
        `unknown_build` if there is none)."""
        return cast(Dict[str, Any], self._call("GET", _build_url(key)))

    def discard_build(self, key: str) -> None:
        """DELETE /builds/{key}: the next `build` of the key builds it again
        (404 `unknown_build` if there is none). Stores made of it stay."""
        self._call("DELETE", _build_url(key))

    def _make_build(self, key: str, path: str, migrate: Callable[[str], Any]) -> None:
        """This caller's build: migrate, then finish; discarded if either fails."""
        try:
            migrate(path)
        except BaseException:
            self._discard_quietly(key)
            raise
        try:
            self._finish(key)
        except LarderError as error:
            # Refused (409, 422): no one else should wait for it until its
            # lease runs out. Gone (404) or no answer (0): nothing to do.
            if error.status not in (0, 404):
                self._discard_quietly(key)
            raise

    def _finish(self, key: str) -> None:
        """POST /builds/{key}/finish, asked again while it answers 409
        `conflict` (a connection still writing the file)."""
        self._while_conflict(lambda: self._call("POST", _build_url(key) + "/finish"))

    @staticmethod
    def _while_conflict(request: Callable[[], Any]) -> Any:
        """`request()`'s answer, asked up to `FINISH_ATTEMPTS` times while it
        raises 409 `conflict` (a write transaction open on the server's
        side), a Retry-After apart."""
        for attempt in range(1, FINISH_ATTEMPTS + 1):
            try:
                return request()
            except LarderError as error:
                if error.status != 409 or attempt == FINISH_ATTEMPTS:
                    raise
                pause = RETRY_AFTER_DEFAULT if error.retry_after is None else error.retry_after
                time.sleep(min(max(pause, 0.0), RETRY_AFTER_MAX))
        raise AssertionError("not reached")  # pragma: no cover

    def _discard_quietly(self, key: str) -> None:
        try:
            self.discard_build(key)
        except Exception:
            pass  # the error that made us discard it is the one to report

    def _await_build(self, key: str, deadline: float, timeout_ms: int) -> bool:
        """Long polls another caller's build: True once it is ready, False
        when it was discarded (its builder failed, its lease ran out)."""
        while True:
            left = int((deadline - time.monotonic()) * 1000)
            if left <= 0:
                raise Timeout(408, "timeout", "build '%s' was still building after %d ms" % (key, timeout_ms),
                              {"key": key, "timeout_ms": timeout_ms})
            poll = min(left, BUILD_POLL_MS)
            try:
                info = self._call("GET", _build_url(key), query={"wait": "ready", "timeout_ms": poll},
                                  timeout=poll / 1000.0 + self.timeout)
            except LarderError as error:
                if error.status == 408:
                    continue  # still building
                if error.code == "unknown_build":
                    return False
                raise
            if not isinstance(info, dict) or info.get("state") != "building":
                return True

    def close(self) -> None:
        """Closes the client's connections, every thread's (a later call opens a new one)."""
        with self._lock:
            connections = [connection for _, connection in self._connections]
            self._connections = []
            self._generation += 1  # every thread makes a new one next time
        for connection in connections:
            connection.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- HTTP ------------------------------------------------------------------

    def _connection(self) -> http.client.HTTPConnection:
        """This thread's connection. A process forked from this one (a
        multiprocessing worker) makes its own rather than share the socket."""
        connection = getattr(self._local, "connection", None)
        if connection is None or self._local.pid != os.getpid() or self._local.generation != self._generation:
            if self._https:
                connection = http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout)
            else:
                connection = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
            self._local.connection = connection
            self._local.pid = os.getpid()
            with self._lock:
                self._local.generation = self._generation
                # The connections of threads that have ended are closed here.
                ended = [c for t, c in self._connections if not t.is_alive()]
                self._connections = [(t, c) for t, c in self._connections if t.is_alive()]
                self._connections.append((threading.current_thread(), connection))
            for old in ended:
                old.close()
        return connection

    def _drop(self, connection: http.client.HTTPConnection) -> None:
        connection.close()
        if getattr(self._local, "connection", None) is connection:
            self._local.connection = None
        with self._lock:
            self._connections = [(t, c) for t, c in self._connections if c is not connection]

    def _headers(self, content_type: Optional[str]) -> Dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": _USER_AGENT}
        if content_type is not None:
            headers["Content-Type"] = content_type
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        return headers

    def _open(self, method: str, path: str, query: Optional[Dict[str, Any]], body: Any,
              timeout: Optional[float], raw: Union[bytes, IO[bytes], None] = None, raw_type: str = SQLITE_TYPE,
              ) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Sends one request and reads the status line and headers of its
        answer. The body is `body` as JSON, or `raw` (bytes, or a file
        opened for reading in binary, sent from where it stands) of the
        type `raw_type` (a SQLite database unless said)."""
        if self._settle is not None:
            self._settle()
        target = self._prefix + path
        if query:
            target += "?" + urllib.parse.urlencode([(k, v) for k, v in query.items() if v is not None])
        data: Union[bytes, IO[bytes], None] = None
        content_type = None
        if raw is not None:
            data, content_type = raw, raw_type
        elif body is not None:
            data, content_type = json.dumps(body).encode("utf-8"), "application/json"
        headers = self._headers(content_type)
        start = None
        if data is not None and not isinstance(data, bytes):
            start = data.tell()
            headers["Content-Length"] = str(os.fstat(data.fileno()).st_size - start)
        limit = timeout if timeout is not None else self.timeout
        for attempt in (1, 2):
            if start is not None and data is not None and not isinstance(data, bytes):
                data.seek(start)  # sent again from the start on a retry
            connection = self._connection()
            reused = connection.sock is not None
            if reused:
                connection.sock.settimeout(limit)
            else:
                connection.timeout = limit
            try:
                connection.request(method, target, body=data, headers=headers)
                return connection, connection.getresponse()
            except BaseException as error:
                self._drop(connection)
                # A kept-alive connection that the server closed meanwhile (its
                # idle timeout) fails like this before any answer: once more on
                # a new connection.
                if reused and attempt == 1 and isinstance(error, _STALE):
                    continue
                wrapped = _transport_error(error, "%s %s" % (method, path), self.url, limit)
                if wrapped is None:
                    raise
                raise wrapped from error
        raise AssertionError("not reached")  # pragma: no cover

    def _call(self, method: str, path: str, *, query: Optional[Dict[str, Any]] = None, body: Any = None,
              timeout: Optional[float] = None, raw: Union[bytes, IO[bytes], None] = None,
              raw_type: str = SQLITE_TYPE) -> Any:
        """One request; the decoded JSON answer (None for an empty one)."""
        return self._exchange(method, path, query=query, body=body, timeout=timeout, raw=raw, raw_type=raw_type)[1]

    def _exchange(self, method: str, path: str, *, query: Optional[Dict[str, Any]] = None, body: Any = None,
                  timeout: Optional[float] = None, raw: Union[bytes, IO[bytes], None] = None,
                  raw_type: str = SQLITE_TYPE, results: Tuple[int, ...] = ()) -> Tuple[int, Any]:
        """One request; the 2xx status and the decoded JSON answer (None for
        an empty one). `raw` is a body sent as it is (a SQLite database),
        instead of `body` as JSON. A status in `results` whose answer is a
        JSON object that is no error body is an answer too (a failed check's
        422)."""
        connection, response = self._open(method, path, query, body, timeout, raw, raw_type)
        try:
            payload = response.read()
        except BaseException as error:
            self._drop(connection)
            wrapped = _transport_error(error, "%s %s" % (method, path), self.url, timeout or self.timeout)
            if wrapped is None:
                raise
            raise wrapped from error
        if response.status in results:
            try:
                answer = json.loads(payload.decode("utf-8"))
            except ValueError:
                answer = None
            if isinstance(answer, dict) and "error" not in answer:
                return response.status, answer
        if not 200 <= response.status < 300:
            raise _error_from(response.status, response.reason, response.headers, payload)
        if not payload:
            return response.status, None
        try:
            return response.status, json.loads(payload.decode("utf-8"))
        except ValueError as error:
            raise LarderError(response.status, "bad_response", "%s %s answered %d with a body that is not JSON"
                              % (method, path, response.status)) from error

    def _download(self, path: str, query: Optional[Dict[str, Any]], destination: Union[str, "os.PathLike[str]"]) -> str:
        """Streams a 200 answer's body into the file `destination` (written
        under a temporary name beside it, renamed when complete)."""
        destination = os.fspath(destination)
        limit = max(self.timeout, DOWNLOAD_TIMEOUT)
        connection, response = self._open("GET", path, query, None, limit)

        def read(size: int = -1) -> bytes:
            try:
                return response.read(size) if size >= 0 else response.read()
            except BaseException as error:
                self._drop(connection)
                wrapped = _transport_error(error, "GET " + path, self.url, limit)
                if wrapped is None:
                    raise
                raise wrapped from error

        if response.status != 200:
            raise _error_from(response.status, response.reason, response.headers, read())
        partial = None
        try:
            directory = os.path.dirname(os.path.abspath(destination))
            os.makedirs(directory, exist_ok=True)
            fd, partial = tempfile.mkstemp(prefix=".larder-", suffix=".part", dir=directory)
            with os.fdopen(fd, "wb") as out:
                while True:
                    chunk = read(1 << 16)
                    if not chunk:
                        break
                    out.write(chunk)
            os.replace(partial, destination)
            partial = None
        except BaseException:
            # The answer was not read to its end: this connection is done.
            self._drop(connection)
            raise
        finally:
            if partial is not None:
                try:
                    os.unlink(partial)
                except OSError:
                    pass
        return destination


# Errors of a connection that the server had closed before this request.
_STALE = (http.client.BadStatusLine, ConnectionResetError, ConnectionAbortedError, BrokenPipeError)


def _transport_error(error: BaseException, what: str, url: str, limit: float) -> Optional[LarderError]:
    """A failure below HTTP as a LarderError with status 0 and code
    `unreachable`; None for anything else (KeyboardInterrupt, a full disk, ...)."""
    if isinstance(error, socket.timeout):
        return LarderError(0, "unreachable", "%s: no answer from %s within %g s" % (what, url, limit))
    if isinstance(error, _STALE) or isinstance(error, http.client.HTTPException):
        return _broken(error, what, url)
    if isinstance(error, OSError):
        return LarderError(0, "unreachable", "cannot reach Larder at %s: %s" % (url, error))
    return None


def _broken(error: BaseException, what: str, url: str) -> LarderError:
    """A connection that broke during `what`, as a LarderError."""
    return LarderError(0, "unreachable", "%s: the connection to %s broke: %r" % (what, url, error))


def _segment(value: str) -> str:
    return urllib.parse.quote(str(value), safe="")


def _build_url(key: str) -> str:
    return "/builds/" + _segment(key)


# A local copy's state as `Store` compares it: (size, mtime) of the
# database and of its -wal (None when missing or empty).
_Signature = Tuple[Optional[Tuple[int, int]], Optional[Tuple[int, int]]]


def _stat(path: str, empty_is_none: bool = False) -> Optional[Tuple[int, int]]:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    if empty_is_none and info.st_size == 0:
        return None
    return info.st_size, info.st_mtime_ns


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class Store:
    """One store. `info` is the store object as last answered by the server
    (`refresh()` reads it again); `id` comes from it. `path` is the live
    SQLite file, to open with sqlite3 on the same machine: ``info["path"]``.

    In remote mode (`remote` is True: the client's mode) `path` is instead a
    local copy of the store, ``larder-remote-XXXX/store.sqlite`` in the
    temporary directory, and ``info["path"]`` stays the server's path, of no
    use here. `check_in()` hands the copy back; `load`, `migrate` and a
    `query` check it in first when it changed, and `load`, `migrate`,
    `reset` and a `query` that changes rows download the store over it
    again. `counts`, `wait`, `diff`, `schema`, `artifact`, `database`, a
    read-only `query` and `refresh` see what was last checked in. `close()`
    (and `delete()`) removes the copy.

    Used as a context manager, the store is deleted on leaving the block.
    """

    def __init__(self, client: Client, info: Dict[str, Any]):
        self.client = client
        self.info = info
        self.remote = client.remote
        # Remote mode: the folder of the local copy (None until it is made,
        # and after close), and its state when last checked out or in.
        self._folder: Optional[str] = None
        self._synced: Optional[_Signature] = None
        self._cleanup: Optional[weakref.finalize[..., Any]] = None

    @property
    def id(self) -> str:
        return cast(str, self.info["id"])

    @property
    def path(self) -> str:
        """The SQLite file to open: the server's (local mode), or the local
        copy (remote mode; downloaded now when there is none yet)."""
        if not self.remote:
            return cast(str, self.info["path"])
        if self._folder is None:
            self.check_out()
        return self._local_path()

    def _local_path(self) -> str:
        return os.path.join(cast(str, self._folder), LOCAL_NAME)

    def __repr__(self) -> str:
        if self.remote:
            where = self._local_path() if self._folder is not None else "(no local copy)"
            return "<larder.Store %s remote, %s>" % (self.id, where)
        return "<larder.Store %s %s>" % (self.id, self.info.get("path"))

    # --- remote mode: the local copy --------------------------------------------

    def check_out(self) -> "Store":
        """Remote mode: downloads the store (GET /stores/{id}/database) over
        the local copy, making its private folder the first time (written
        beside it and renamed over it; a stale ``-wal`` and ``-shm`` are
        removed first). Changes made to the copy since the last check-in are
        lost: `check_in()` first to keep them. Close the copy's connections
        before. Local mode: does nothing. Returns the store."""
        if not self.remote:
            return self
        made = self._folder is None
        if self._folder is None:
            folder = tempfile.mkdtemp(prefix=REMOTE_FOLDER_PREFIX)  # mode 0700
            self._folder = folder
            self._cleanup = weakref.finalize(self, shutil.rmtree, folder, True)
        local = self._local_path()
        try:
            incoming = self.client._download(self._url("/database"), None, local + ".incoming")
            # A write made right after the download may fall in the same
            # clock tick as the file's mtime, and a rewrite keeps the size:
            # dated back, the copy's first change is always seen.
            stat = os.stat(incoming)
            os.utime(incoming, ns=(stat.st_atime_ns, stat.st_mtime_ns - 2000000000))
            for suffix in ("-wal", "-shm"):  # they belong to the old file
                _unlink_quietly(local + suffix)
            os.replace(incoming, local)
        except BaseException:
            if made:
                self.close()
            raise
        self._synced = self._signature()
        return self

    def check_in(self) -> "Store":
        """Remote mode: hands the local copy back to the server (PUT
        /stores/{id}/database), which takes it as the store's contents, all
        or nothing; its creation state stays, so `diff`, `reset`, `artifact`
        and checks compare what the test did against what it was given. A
        copy with a non-empty ``store.sqlite-wal`` beside it goes as a zip of
        both, else the file alone. Close (or commit) the copy's connections
        first: a copy taken while a connection writes may be torn. Updates
        `info`; returns the store. Local mode, or no local copy yet: does
        nothing. A copy the server refuses raises `LarderError` (400/415/422
        not a sound database, 413 too big, 429 over the server's disk; 409
        `conflict`, a write transaction open on the server, is asked again a
        Retry-After apart, up to 5 times)."""
        if not self.remote or self._folder is None:
            return self
        local = self._local_path()
        signature = self._signature()  # before reading: a write meanwhile is seen next time
        body, content_type = local, SQLITE_TYPE
        if signature[1] is not None:  # a WAL with frames: the database without it is not the store
            body, content_type = local + ".checkin.zip", ZIP_TYPE
            with zipfile.ZipFile(body, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
                archive.write(local, LOCAL_NAME)
                archive.write(local + "-wal", LOCAL_NAME + "-wal")
        try:
            self.info = self.client._while_conflict(lambda: self._put(body, content_type))
        finally:
            if content_type == ZIP_TYPE:
                _unlink_quietly(body)
        self._synced = signature
        return self

    def _put(self, body: str, content_type: str) -> Any:
        with open(body, "rb") as file:
            return self.client._call("PUT", self._url("/database"), raw=file, raw_type=content_type,
                                     timeout=max(self.client.timeout, DOWNLOAD_TIMEOUT))

    def changed(self) -> bool:
        """Remote mode: whether the local copy (the database or its -wal,
        their size or mtime) changed since it was last checked out or in.
        Local mode, or no local copy: False."""
        return self.remote and self._folder is not None and self._signature() != self._synced

    def close(self) -> None:
        """Remote mode: removes the local copy and its folder (the store on
        the server stays; a later `path` downloads it again). Close the
        copy's connections first. Local mode: does nothing."""
        cleanup, self._cleanup, self._folder, self._synced = self._cleanup, None, None, None
        if cleanup is not None:
            cleanup()

    def _signature(self) -> _Signature:
        local = self._local_path()
        return _stat(local), _stat(local + "-wal", empty_is_none=True)

    def _before_change(self) -> None:
        """Before a server-side change: the local copy's changes go first."""
        if self.changed():
            self.check_in()

    def _after_change(self) -> None:
        """After a server-side change: the local copy follows it."""
        if self.remote and self._folder is not None:
            self.check_out()

    # --- the API ------------------------------------------------------------------

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.delete()
        except LarderError as error:
            if error.code != "store_not_found":
                raise

    def _url(self, sub: str = "") -> str:
        return "/stores/" + _segment(self.id) + sub

    def refresh(self) -> "Store":
        """GET /stores/{id}: reads `info` again; returns the store."""
        self.info = self.client._call("GET", self._url())
        return self

    def counts(self, tables: Union[str, Sequence[str], None] = None) -> Dict[str, int]:
        """Row counts, ``{table: n}``: every user table, or only `tables`."""
        query = {"tables": ",".join(_names(tables) or ())} if tables is not None else None
        return cast(Dict[str, int], self.client._call("GET", self._url("/counts"), query=query)["counts"])

    def wait(self, condition: Union[str, Sequence[str]], timeout_ms: int = WAIT_TIMEOUT_MS,
             tables: Union[str, Sequence[str], None] = None) -> Dict[str, int]:
        """Long poll until `condition` holds (``"artworks>=13"``; several, as
        a list or comma-separated, must all hold); returns the counts then.
        Raises `larder.Timeout`, carrying the last counts, when it does not
        hold within `timeout_ms`."""
        wanted = condition if isinstance(condition, str) else ",".join(condition)
        query: Dict[str, Any] = {"wait": wanted, "timeout_ms": int(timeout_ms)}
        if tables is not None:
            query["tables"] = ",".join(_names(tables) or ())
        answer = self.client._call("GET", self._url("/counts"), query=query,
                                   timeout=int(timeout_ms) / 1000.0 + self.client.timeout)
        return cast(Dict[str, int], answer["counts"])

    def query(self, sql: str, params: Union[Sequence[Any], Dict[str, Any], None] = None, *,
              max_rows: Optional[int] = None, timeout_ms: Optional[int] = None) -> Dict[str, Any]:
        """One SQL statement run by the server in this store:
        ``{"columns": [...], "rows": [[...]], "changes": n}``. `params` bind
        ``?`` (a list) or ``:name`` (a dict) parameters.

        Remote mode: the local copy is checked in first when it changed, and
        downloaded again after a statement whose ``changes`` > 0."""
        self._before_change()
        body: Dict[str, Any] = {"sql": sql}
        if params is not None:
            body["params"] = params if isinstance(params, dict) else list(params)
        if max_rows is not None:
            body["max_rows"] = max_rows
        if timeout_ms is not None:
            body["timeout_ms"] = timeout_ms
        answer = cast(Dict[str, Any], self.client._call("POST", self._url("/query"), body=body))
        if isinstance(answer, dict) and (answer.get("changes") or 0) > 0:
            self._after_change()
        return answer

    def load(self, fixtures: Union[str, Sequence[str], None] = None, rows: Optional[Dict[str, List[Dict[str, Any]]]] = None,
             sql: Optional[str] = None) -> Dict[str, Any]:
        """Loads data, all or nothing: named `fixtures` of the store's
        template, `rows` (``{"table": [{"col": value}]}``) or `sql` (one of
        the three). Returns ``{"loaded": [...], "counts": {...}}``. Remote
        mode: the local copy is checked in first when it changed, and
        downloaded again after."""
        body: Dict[str, Any] = {}
        if fixtures is not None:
            body["fixtures"] = _names(fixtures)
        if rows is not None:
            body["rows"] = rows
        if sql is not None:
            body["sql"] = sql
        self._before_change()
        answer = cast(Dict[str, Any], self.client._call("POST", self._url("/fixtures"), body=body))
        self._after_change()
        return answer

    def migrate(self, to: str = "latest") -> Dict[str, Any]:
        """Migrates the store: ``{"from": ..., "to": ..., "applied": [...]}``.
        Remote mode: the local copy is checked in first when it changed, and
        downloaded again after."""
        self._before_change()
        answer: Dict[str, Any] = self.client._call("POST", self._url("/migrate"), body={"to": str(to)})
        if isinstance(answer, dict) and "to" in answer:
            self.info["version"] = answer["to"]
        self._after_change()
        return answer

    def migrations(self) -> Dict[str, Any]:
        """GET /stores/{id}/migrations: the version and each migration's state."""
        return cast(Dict[str, Any], self.client._call("GET", self._url("/migrations")))

    def schema(self) -> Dict[str, Any]:
        """GET /stores/{id}/schema: tables, columns, indexes, foreign keys."""
        return cast(Dict[str, Any], self.client._call("GET", self._url("/schema")))

    def reset(self) -> "Store":
        """POST /stores/{id}/reset: the contents back to what they were when
        the store was made, in place (same path); returns the store. Remote
        mode: the local copy is downloaded again (what it held that was not
        checked in is gone, as the reset would have it)."""
        self.info = self.client._call("POST", self._url("/reset"))
        self._after_change()
        return self

    def diff(self, tables: Union[str, Sequence[str], None] = None, limit: Optional[int] = None) -> Dict[str, Any]:
        """GET /stores/{id}/diff: what changed since the store was made:
        ``{"base": ..., "schema": {"added", "removed", "changed"}, "tables":
        {"t": {"inserted", "updated", "deleted", "truncated", "rows": [{"op",
        "key", "old", "new"}]}}}``, changed tables only; blobs come as
        ``{"base64": ...}``. `limit` (0..10000, the server's default 100) caps
        the rows listed per table, not the counts; `tables` narrows."""
        query: Dict[str, Any] = {}
        if tables is not None:
            query["tables"] = ",".join(_names(tables) or ())
        if limit is not None:
            query["limit"] = limit
        return cast(Dict[str, Any], self.client._call("GET", self._url("/diff"), query=query or None))

    def artifact(self, path: Union[str, "os.PathLike[str]"], compression: Optional[str] = None) -> str:
        """Saves the store's artifact (a zip: store.sqlite, manifest.json, and
        its creation state base.sqlite, so that `larder open` shows what the
        test changed) to the file `path`, streamed; returns the path.
        `compression` is ``"deflate"`` (the server's default) or ``"store"``."""
        query = {"base": "true"}
        if compression is not None:
            query["compression"] = compression
        return self.client._download(self._url("/artifact"), query, path)

    def database(self, path: Union[str, "os.PathLike[str]"]) -> str:
        """Saves a consistent copy of the database to the file `path`; returns the path."""
        return self.client._download(self._url("/database"), None, path)

    def keep(self, ttl_seconds: Optional[int] = None) -> "Store":
        """PATCH keep: the store outlives its ttl until deleted; returns the store."""
        body: Dict[str, Any] = {"keep": True}
        if ttl_seconds is not None:
            body["ttl_seconds"] = ttl_seconds
        self.info = self.client._call("PATCH", self._url(), body=body)
        return self

    def delete(self) -> None:
        """DELETE /stores/{id}: removes every file of the store (and, in
        remote mode, the local copy: see `close`)."""
        try:
            self.client._call("DELETE", self._url())
        except LarderError as error:
            if error.code == "store_not_found":
                self.close()
            raise
        self.close()


# --- snapshot checks ---------------------------------------------------------------

SNAPSHOT_SUFFIX = ".sqlite"
EXPECT_SUFFIX = ".expect.json"


def _reference(build: Optional[str], template: Optional[str], version: Optional[str],
               store: Union[str, Store, None]) -> Dict[str, Any]:
    """`against` of a check: exactly one of a build, a template (at a version), a store."""
    given = [name for name, value in (("build", build), ("template", template), ("store", store)) if value is not None]
    if len(given) != 1:
        raise ValueError("a snapshot is checked against exactly one of build=, template= or store=, not %s"
                         % (" and ".join(given) or "none"))
    if build is not None:
        return {"build": build}
    if store is not None:
        return {"store": store.id if isinstance(store, Store) else str(store)}
    against: Dict[str, Any] = {"template": template}
    if version is not None:
        against["version"] = str(version)
    return against


def snapshot_files(directory: Union[str, "os.PathLike[str]"]) -> List[str]:
    """The paths of the ``*.sqlite`` files in `directory`, in name order. No
    directory, or none there, is a `ValueError`: nothing checked is not a pass."""
    directory = os.fspath(directory)
    try:
        names = sorted(name for name in os.listdir(directory)
                       if name.endswith(SNAPSHOT_SUFFIX) and os.path.isfile(os.path.join(directory, name)))
    except FileNotFoundError:
        raise ValueError("no snapshot directory %s" % os.path.abspath(directory)) from None
    if not names:
        raise ValueError("no *%s snapshots in %s" % (SNAPSHOT_SUFFIX, os.path.abspath(directory)))
    return [os.path.join(directory, name) for name in names]


def expectations_of(path: Union[str, "os.PathLike[str]"]) -> Optional[Dict[str, Any]]:
    """The parsed ``NAME.expect.json`` beside the snapshot ``NAME.sqlite``, or
    None when there is none."""
    path = os.fspath(path)
    stem = path[:-len(SNAPSHOT_SUFFIX)] if path.endswith(SNAPSHOT_SUFFIX) else path
    expect_path = stem + EXPECT_SUFFIX
    try:
        with open(expect_path, encoding="utf-8") as file:
            expect = json.load(file)
    except FileNotFoundError:
        return None
    except ValueError as error:
        raise ValueError("%s is not JSON: %s" % (expect_path, error)) from None
    if not isinstance(expect, dict):
        raise ValueError("%s must hold a JSON object, not %s" % (expect_path, type(expect).__name__))
    return expect


def describe_failure(result: Dict[str, Any]) -> str:
    """A failed check's result as text: the snapshot, its versions and the
    reference, each failure on a line of its own, the notes, the kept store
    and a migrator's traceback."""
    against = result.get("against") or {}
    if "build" in against:
        reference = "build %s" % against["build"]
    elif "template" in against:
        reference = "template %s at %s" % (against["template"], against.get("version") or "latest")
    elif "store" in against:
        reference = "store %s" % against["store"]
    else:
        reference = "its reference"
    failures = [str(f) for f in result.get("failures") or []] or ["(the server gave no reason)"]
    versions = ""
    if result.get("from_version") is not None or result.get("to_version") is not None:
        versions = " (%s → %s)" % (result.get("from_version") or "no version", result.get("to_version") or "no version")
    lines = ["snapshot %s%s failed its check against %s: %d failure%s"
             % (result.get("snapshot") or "(unnamed)", versions, reference, len(failures), "" if len(failures) == 1 else "s")]
    lines += ["  - " + failure for failure in failures]
    lines += ["  note: %s" % note for note in result.get("notes") or []]
    if result.get("kept_store"):
        lines.append("  the migrated store is kept: %s (client.store(id).database(path) downloads it)" % result["kept_store"])
    if result.get("traceback"):
        lines.append("  the migrator's traceback:")
        lines += ["    " + line for line in result["traceback"].rstrip().splitlines()]
    return "\n".join(lines)


def assert_passed(result: Dict[str, Any]) -> Dict[str, Any]:
    """Raises `SnapshotCheckFailed` (an AssertionError naming the snapshot,
    its versions, every failure and the kept store) unless `result`, a
    check's, passed; returns it when it did."""
    __tracebackhide__ = True  # pytest shows the caller's line
    if not result.get("passed"):
        raise SnapshotCheckFailed(result)
    return result


def check_snapshots(directory: Union[str, "os.PathLike[str]"], *, migrate: Callable[[str], Any],
                    build: Optional[str] = None, template: Optional[str] = None, version: Optional[str] = "latest",
                    store: Union[str, Store, None] = None, data: bool = True,
                    client: Optional[Client] = None) -> List[Dict[str, Any]]:
    """`Client.check_snapshots` with `client` (default: a `Client()` of
    $LARDER_URL and $LARDER_TOKEN, closed on return): the results of every
    ``*.sqlite`` snapshot in `directory`."""
    if client is not None:
        return client.check_snapshots(directory, migrate=migrate, build=build, template=template, version=version,
                                      store=store, data=data)
    with Client() as own:
        return own.check_snapshots(directory, migrate=migrate, build=build, template=template, version=version,
                                   store=store, data=data)


def _one_line(error: BaseException) -> str:
    text = "%s: %s" % (type(error).__name__, error) if str(error) else type(error).__name__
    return " ".join(text.split())


def _delete_quietly(store: Store) -> None:
    try:
        store.delete()
    except Exception:
        pass  # the error that made us delete it is the one to report
