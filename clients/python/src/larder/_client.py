"""The HTTP client: `Client`, `Store` and the errors, standard library only.

Every method is one request of the contract (the server's `GET /openapi.json`
describes each; the repository's README shows them), except
`Client.build`, which makes the requests of an app-built template's whole
dance (claim, migrate, finish or discard; or wait). A `Client` keeps one keep-alive connection per thread, so a store may be
written from one thread while another waits on its counts.
"""
from __future__ import annotations

import http.client
import json
import os
import socket
import tempfile
import threading
import time
import urllib.parse
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

__all__ = ["Client", "Store", "LarderError", "Timeout", "DEFAULT_URL"]

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

_USER_AGENT = "larder-python/0.1.0"


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


def _error_from(status: int, reason: str, headers: http.client.HTTPMessage, payload: bytes) -> LarderError:
    code, message, details = "http_error", "", {}
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
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *, timeout: float = DEFAULT_TIMEOUT):
        self.url = (url or os.environ.get("LARDER_URL") or DEFAULT_URL).rstrip("/")
        self.token = token if token is not None else (os.environ.get("LARDER_TOKEN") or None)
        self.timeout = timeout
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("a Larder URL is http(s)://HOST[:PORT][/PREFIX], not %r" % self.url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self._local = threading.local()
        self._lock = threading.Lock()
        # Every thread's connection, with its thread, to close them all.
        self._connections: List[Tuple[threading.Thread, http.client.HTTPConnection]] = []
        self._generation = 0

    def __repr__(self) -> str:
        return "larder.Client(%r)" % self.url

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
        `larder.Timeout`."""
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
        return Store(self, self._call("POST", "/stores", body=body, timeout=limit))

    def store(self, store_id: str) -> "Store":
        """GET /stores/{id}: a store that exists already (404 `store_not_found` if not)."""
        return Store(self, self._call("GET", "/stores/" + _segment(store_id)))

    get_store = store

    def health(self) -> Dict[str, Any]:
        """GET /health."""
        return self._call("GET", "/health")

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
        `timeout_ms` (a migrate of this caller's own is not cut short)."""
        deadline = time.monotonic() + int(timeout_ms) / 1000.0
        body: Dict[str, Any] = {"key": key}
        if label is not None:
            body["label"] = label
        while True:
            status, answer = self._exchange("POST", "/builds", body=body)
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
        return self._call("GET", "/builds")["builds"]

    def build_info(self, key: str) -> Dict[str, Any]:
        """GET /builds/{key}: ``{"key", "state": "building" | "ready", "label",
        "started_at", "finished_at", "counts", "size_bytes", ...}`` (404
        `unknown_build` if there is none)."""
        return self._call("GET", _build_url(key))

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
        for attempt in range(1, FINISH_ATTEMPTS + 1):
            try:
                self._call("POST", _build_url(key) + "/finish")
                return
            except LarderError as error:
                if error.status != 409 or attempt == FINISH_ATTEMPTS:
                    raise
                pause = RETRY_AFTER_DEFAULT if error.retry_after is None else error.retry_after
                time.sleep(min(max(pause, 0.0), RETRY_AFTER_MAX))

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

    def _headers(self, body: Optional[bytes]) -> Dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": _USER_AGENT}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        return headers

    def _open(self, method: str, path: str, query: Optional[Dict[str, Any]], body: Any,
              timeout: Optional[float]) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Sends one request and reads the status line and headers of its answer."""
        target = self._prefix + path
        if query:
            target += "?" + urllib.parse.urlencode([(k, v) for k, v in query.items() if v is not None])
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = self._headers(data)
        limit = timeout if timeout is not None else self.timeout
        for attempt in (1, 2):
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
              timeout: Optional[float] = None) -> Any:
        """One request; the decoded JSON answer (None for an empty one)."""
        return self._exchange(method, path, query=query, body=body, timeout=timeout)[1]

    def _exchange(self, method: str, path: str, *, query: Optional[Dict[str, Any]] = None, body: Any = None,
                  timeout: Optional[float] = None) -> Tuple[int, Any]:
        """One request; the 2xx status and the decoded JSON answer (None for an empty one)."""
        connection, response = self._open(method, path, query, body, timeout)
        try:
            payload = response.read()
        except BaseException as error:
            self._drop(connection)
            wrapped = _transport_error(error, "%s %s" % (method, path), self.url, timeout or self.timeout)
            if wrapped is None:
                raise
            raise wrapped from error
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
        return LarderError(0, "unreachable", "%s: the connection to %s broke: %r" % (what, url, error))
    if isinstance(error, OSError):
        return LarderError(0, "unreachable", "cannot reach Larder at %s: %s" % (url, error))
    return None


def _segment(value: str) -> str:
    return urllib.parse.quote(str(value), safe="")


def _build_url(key: str) -> str:
    return "/builds/" + _segment(key)


class Store:
    """One store. `info` is the store object as last answered by the server
    (`refresh()` reads it again); `id` and `path` come from it. `path` is the
    live SQLite file, to open with sqlite3 on the same machine.

    Used as a context manager, the store is deleted on leaving the block.
    """

    def __init__(self, client: Client, info: Dict[str, Any]):
        self.client = client
        self.info = info

    @property
    def id(self) -> str:
        return self.info["id"]

    @property
    def path(self) -> str:
        return self.info["path"]

    def __repr__(self) -> str:
        return "<larder.Store %s %s>" % (self.id, self.path)

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
        query = {"tables": ",".join(_names(tables))} if tables is not None else None
        return self.client._call("GET", self._url("/counts"), query=query)["counts"]

    def wait(self, condition: Union[str, Sequence[str]], timeout_ms: int = WAIT_TIMEOUT_MS,
             tables: Union[str, Sequence[str], None] = None) -> Dict[str, int]:
        """Long poll until `condition` holds (``"artworks>=13"``; several, as
        a list or comma-separated, must all hold); returns the counts then.
        Raises `larder.Timeout`, carrying the last counts, when it does not
        hold within `timeout_ms`."""
        wanted = condition if isinstance(condition, str) else ",".join(condition)
        query: Dict[str, Any] = {"wait": wanted, "timeout_ms": int(timeout_ms)}
        if tables is not None:
            query["tables"] = ",".join(_names(tables))
        return self.client._call("GET", self._url("/counts"), query=query,
                                 timeout=int(timeout_ms) / 1000.0 + self.client.timeout)["counts"]

    def query(self, sql: str, params: Union[Sequence[Any], Dict[str, Any], None] = None, *,
              max_rows: Optional[int] = None, timeout_ms: Optional[int] = None) -> Dict[str, Any]:
        """One SQL statement run by the server in this store:
        ``{"columns": [...], "rows": [[...]], "changes": n}``. `params` bind
        ``?`` (a list) or ``:name`` (a dict) parameters."""
        body: Dict[str, Any] = {"sql": sql}
        if params is not None:
            body["params"] = params if isinstance(params, dict) else list(params)
        if max_rows is not None:
            body["max_rows"] = max_rows
        if timeout_ms is not None:
            body["timeout_ms"] = timeout_ms
        return self.client._call("POST", self._url("/query"), body=body)

    def load(self, fixtures: Union[str, Sequence[str], None] = None, rows: Optional[Dict[str, List[Dict[str, Any]]]] = None,
             sql: Optional[str] = None) -> Dict[str, Any]:
        """Loads data, all or nothing: named `fixtures` of the store's
        template, `rows` (``{"table": [{"col": value}]}``) or `sql` (one of
        the three). Returns ``{"loaded": [...], "counts": {...}}``."""
        body: Dict[str, Any] = {}
        if fixtures is not None:
            body["fixtures"] = _names(fixtures)
        if rows is not None:
            body["rows"] = rows
        if sql is not None:
            body["sql"] = sql
        return self.client._call("POST", self._url("/fixtures"), body=body)

    def migrate(self, to: str = "latest") -> Dict[str, Any]:
        """Migrates the store: ``{"from": ..., "to": ..., "applied": [...]}``."""
        answer = self.client._call("POST", self._url("/migrate"), body={"to": str(to)})
        if isinstance(answer, dict) and "to" in answer:
            self.info["version"] = answer["to"]
        return answer

    def migrations(self) -> Dict[str, Any]:
        """GET /stores/{id}/migrations: the version and each migration's state."""
        return self.client._call("GET", self._url("/migrations"))

    def schema(self) -> Dict[str, Any]:
        """GET /stores/{id}/schema: tables, columns, indexes, foreign keys."""
        return self.client._call("GET", self._url("/schema"))

    def reset(self) -> "Store":
        """POST /stores/{id}/reset: the contents back to what they were when
        the store was made, in place (same path); returns the store."""
        self.info = self.client._call("POST", self._url("/reset"))
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
            query["tables"] = ",".join(_names(tables))
        if limit is not None:
            query["limit"] = limit
        return self.client._call("GET", self._url("/diff"), query=query or None)

    def artifact(self, path: Union[str, "os.PathLike[str]"], compression: Optional[str] = None) -> str:
        """Saves the store's artifact (a zip: store.sqlite, manifest.json)
        to the file `path`, streamed; returns the path.
        `compression` is ``"deflate"`` (the server's default) or ``"store"``."""
        query = {"compression": compression} if compression is not None else None
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
        """DELETE /stores/{id}: removes every file of the store."""
        self.client._call("DELETE", self._url())
