"""What the pytest plugin does off a test's critical path (issue 48): the
next test's store made while this test runs, and a passing test's store
deleted while the next one runs.

No threads: each request is written to a keep-alive connection of its own
at once, and its answer read later, when it is needed (the next test takes
its store; the oldest of too many deletes; the session's end), by which
time the server has long answered it. So the test process pays for writing
a request and reading an answer that is already there, not for the round
trip, nor for the server's work. The requests are plain HTTP/1.1 of a few
lines, read by the small reader below: http.client's header parsing alone
costs more than the rest of a request here.

`Ahead` is one session's (one pytest-xdist worker's): local mode and an
http:// URL only; the plugin does everything synchronously otherwise.
"""
from __future__ import annotations

import collections
import http.client
import json
import socket
import threading
import time
import urllib.parse
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

from ._client import _USER_AGENT, Client, LarderError, Store, _error_from, _segment, _STALE

# A store made ahead is handed out only this young (the server's default
# ttl is 300 s and a user's may be shorter); an older one is deleted.
READY_MAX_AGE = 60.0
# At most this many deletes unanswered; one more waits for the oldest.
MAX_PENDING_DELETES = 4
# The session's end waits this long, in all, for what is still unanswered.
SETTLE_TIMEOUT = 60.0


class _Answer:
    """A request's answer as the reader below has it."""

    def __init__(self, status: int, reason: str, headers: List[Tuple[str, str]], body: bytes):
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body

    def header(self, name: str) -> Optional[str]:
        name = name.lower()
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return None

    def error(self) -> LarderError:
        message = http.client.HTTPMessage()
        for key, value in self.headers:
            message[key] = value
        return _error_from(self.status, self.reason, message, self.body)


class _Wire:
    """One keep-alive HTTP/1.1 connection: one request written, its answer
    read later; then the next."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.sock: Optional[socket.socket] = None
        self.buffer = b""
        self.used = False  # has carried an answer: a write may find it closed by the server since

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock, self.buffer, self.used = None, b"", False

    def write(self, data: bytes, timeout: float) -> bool:
        """Writes a request; whether the connection had carried one before."""
        reused = self.sock is not None and self.used
        if self.sock is None:
            self.sock = socket.create_connection((self.host, self.port), timeout=timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(timeout)
        self.sock.sendall(data)
        return reused

    def _fill(self) -> None:
        assert self.sock is not None
        chunk = self.sock.recv(65536)
        if not chunk:
            raise http.client.RemoteDisconnected("the server closed the connection")
        self.buffer += chunk

    def read(self, timeout: float, head: bool = False) -> _Answer:
        """The answer to the request written last."""
        assert self.sock is not None
        self.sock.settimeout(timeout)
        while b"\r\n\r\n" not in self.buffer:
            if not self.buffer:
                self._fill()  # nothing at all yet: a closed connection is a stale one (`_STALE`)
            else:
                try:
                    self._fill()
                except http.client.RemoteDisconnected:
                    raise http.client.IncompleteRead(self.buffer) from None
        end = self.buffer.index(b"\r\n\r\n")
        lines = self.buffer[:end].decode("iso-8859-1").split("\r\n")
        self.buffer = self.buffer[end + 4:]
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise http.client.BadStatusLine(lines[0])
        status, reason = int(parts[1]), parts[2] if len(parts) > 2 else ""
        headers = []
        for line in lines[1:]:
            key, _, value = line.partition(":")
            headers.append((key.strip(), value.strip()))
        answer = _Answer(status, reason, headers, b"")
        length = answer.header("Content-Length")
        chunked = (answer.header("Transfer-Encoding") or "").lower() == "chunked"
        if head or status in (204, 304) or 100 <= status < 200:
            body = b""
        elif chunked:
            body = self._chunked()
        elif length is not None:
            size = int(length)
            while len(self.buffer) < size:
                self._fill()
            body, self.buffer = self.buffer[:size], self.buffer[size:]
        else:  # the body ends with the connection
            while True:
                try:
                    self._fill()
                except http.client.RemoteDisconnected:
                    break
            body, self.buffer = self.buffer, b""
            answer.headers.append(("Connection", "close"))
        answer.body = body
        self.used = True
        if (answer.header("Connection") or "").lower() == "close" or parts[0] == "HTTP/1.0":
            self.close()
        return answer

    def _chunked(self) -> bytes:
        body = b""
        while True:
            while b"\r\n" not in self.buffer:
                self._fill()
            line, self.buffer = self.buffer.split(b"\r\n", 1)
            size = int(line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                while b"\r\n\r\n" not in b"\r\n" + self.buffer:  # trailers, then the empty line
                    self._fill()
                self.buffer = (b"\r\n" + self.buffer).split(b"\r\n\r\n", 1)[1]
                return body
            while len(self.buffer) < size + 2:
                self._fill()
            body, self.buffer = body + self.buffer[:size], self.buffer[size + 2:]


class _Sent:
    """A request written and not yet answered (or answered, and read)."""

    def __init__(self, ahead: "Ahead", method: str, target: str, data: bytes, limit: float, what: str):
        self.ahead, self.method, self.target, self.data, self.limit, self.what = ahead, method, target, data, limit, what
        self.wire: Optional[_Wire] = None
        self.reused = False
        self.answer: Optional[_Answer] = None
        self.failure: Optional[LarderError] = None
        self.sent_at = time.monotonic()
        self._write()

    def _write(self) -> None:
        for attempt in (1, 2):
            wire = self.ahead._idle_wire()
            carried = wire.used
            try:
                self.reused = wire.write(self.data, self.limit)
                self.wire = wire
                return
            except OSError as error:
                wire.close()
                # A connection the server closed while it idled: once more on a new one.
                if attempt == 1 and carried and isinstance(error, _STALE):
                    continue
                self.failure = _transport(error, self.what, self.ahead.client.url, self.limit)
                return

    def done(self) -> bool:
        return self.answer is not None or self.failure is not None

    def result(self, deadline: Optional[float] = None) -> _Answer:
        """The answer (any status); raises `LarderError` when none came."""
        if not self.done():
            assert self.wire is not None
            limit = self.limit if deadline is None else max(0.001, min(self.limit, deadline - time.monotonic()))
            try:
                try:
                    self.answer = self.wire.read(limit, head=self.method == "HEAD")
                except _STALE:
                    if not self.reused:
                        raise
                    # Closed by the server before this request reached it (it idled
                    # past the server's limit): the request did not run; once more.
                    self.wire.close()
                    self.reused = self.wire.write(self.data, limit)
                    self.answer = self.wire.read(limit, head=self.method == "HEAD")
            except (OSError, http.client.HTTPException, ValueError) as error:
                self.wire.close()
                self.failure = _transport(error, self.what, self.ahead.client.url, limit)
            self.ahead._release(self.wire)
            self.wire = None
        if self.failure is not None:
            raise self.failure
        assert self.answer is not None
        return self.answer


def _transport(error: BaseException, what: str, url: str, limit: float) -> LarderError:
    if isinstance(error, socket.timeout):
        return LarderError(0, "unreachable", "%s: no answer from %s within %g s" % (what, url, limit))
    if isinstance(error, OSError) and not isinstance(error, _STALE):
        return LarderError(0, "unreachable", "cannot reach Larder at %s: %s" % (url, error))
    return LarderError(0, "unreachable", "%s: the connection to %s broke: %r" % (what, url, error))


class Ready:
    """A store asked for ahead: for the test `name` (its node id), as `key`
    (what the test will ask for) says."""

    def __init__(self, name: str, key: Any, sent: _Sent):
        self.name, self.key, self.sent = name, key, sent


class Ahead:
    """A session's requests off the critical path: at most one store made
    ahead (`prepare`, `take`) and at most MAX_PENDING_DELETES deletes
    unanswered (`delete`). What failed is kept in `failures` (one line
    each) until the plugin reports it; `settle` waits for the deletes and
    `finish`, at the session's end, for everything, deleting the store
    made ahead that no test took."""

    def __init__(self, client: Client):
        self.client = client
        parts = urllib.parse.urlsplit(client.url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.host_header = parts.netloc.rpartition("@")[2]
        self.prefix = parts.path.rstrip("/")
        self.wires: List[_Wire] = []
        self.ready: Optional[Ready] = None
        self.deletes: Deque[Tuple[_Sent, str, str]] = collections.deque()  # (request, store id, whose)
        self.failures: List[str] = []
        self.finished = False

    @staticmethod
    def usable(client: Client) -> bool:
        """Local mode over plain HTTP: what `Ahead` works with."""
        return not client.remote and client.url.startswith("http://")

    # --- the connections -------------------------------------------------------

    def _idle_wire(self) -> _Wire:
        if self.wires:
            return self.wires.pop()
        return _Wire(self.host, self.port)

    def _release(self, wire: _Wire) -> None:
        if wire.sock is not None and len(self.wires) < MAX_PENDING_DELETES + 2:
            self.wires.append(wire)
        else:
            wire.close()

    def _send(self, method: str, path: str, body: Optional[Dict[str, Any]], limit: float) -> _Sent:
        target = self.prefix + path
        lines = ["%s %s HTTP/1.1" % (method, target), "Host: " + self.host_header, "Accept: application/json",
                 "User-Agent: " + _USER_AGENT]
        if self.client.token:
            lines.append("Authorization: Bearer " + self.client.token)
        payload = b""
        if body is not None:
            payload = json.dumps(body).encode("utf-8")
            lines.append("Content-Type: application/json")
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append("Content-Length: %d" % len(payload))
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8") + payload
        return _Sent(self, method, target, data, limit, "%s %s" % (method, path))

    # --- the store made ahead ---------------------------------------------------

    def prepare(self, name: str, key: Any, options: Dict[str, Any]) -> None:
        """Asks for the store of the test `name`, made with
        `create_store(**options)`, and returns at once; `take(key)` gives it."""
        self._discard_ready()
        body, limit = self.client._create_body(**options)
        self.ready = Ready(name, key, self._send("POST", "/stores", body, limit or self.client.timeout))

    def take(self, key: Any) -> Optional[Store]:
        """The store made ahead for `key`, or None: none was, it was for
        another test (it is deleted), it is older than READY_MAX_AGE (also),
        or its creation failed (the caller makes the store as it would
        have, and meets the same error)."""
        ready, self.ready = self.ready, None
        if ready is None:
            return None
        if ready.key != key or time.monotonic() - ready.sent.sent_at > READY_MAX_AGE:
            self._discard(ready)
            return None
        try:
            answer = ready.sent.result()
        except LarderError:
            return None
        if answer.status != 201:
            return None
        try:
            info = json.loads(answer.body.decode("utf-8"))
        except ValueError:
            return None
        return self.client._new_store(info)

    def _discard_ready(self) -> None:
        ready, self.ready = self.ready, None
        if ready is not None:
            self._discard(ready)

    def _discard(self, ready: Ready) -> None:
        """Deletes a store made ahead that no test will take."""
        try:
            answer = ready.sent.result()
        except LarderError:
            return  # no store was made
        if answer.status != 201:
            return
        try:
            store_id = json.loads(answer.body.decode("utf-8"))["id"]
        except (ValueError, KeyError, TypeError):
            return
        self.delete(store_id, "made ahead for %s and not taken" % ready.name)

    # --- deletes ----------------------------------------------------------------

    def delete(self, store_id: str, whose: str) -> None:
        """DELETE /stores/{id}, its answer read later; the oldest unanswered
        delete is read first when MAX_PENDING_DELETES are."""
        while len(self.deletes) >= MAX_PENDING_DELETES:
            self._reap(*self.deletes.popleft())
        sent = self._send("DELETE", "/stores/" + _segment(store_id), None, self.client.timeout)
        if sent.done():
            self._reap(sent, store_id, whose)
        else:
            self.deletes.append((sent, store_id, whose))

    def _reap(self, sent: _Sent, store_id: str, whose: str, deadline: Optional[float] = None) -> None:
        try:
            answer = sent.result(deadline)
        except LarderError as error:
            self.failures.append("deleting store %s (%s) failed: %s" % (store_id, whose, error))
            return
        if 200 <= answer.status < 300:
            return
        refusal = answer.error()
        if refusal.code != "store_not_found":  # the test deleted it itself
            self.failures.append("deleting store %s (%s) failed: %s" % (store_id, whose, refusal))

    def settle(self, deadline: Optional[float] = None) -> None:
        """Waits for every delete sent (not the store made ahead)."""
        while self.deletes:
            self._reap(*self.deletes.popleft(), deadline=deadline)

    def finish(self, timeout: float = SETTLE_TIMEOUT) -> None:
        """The session's end: the store made ahead that no test took is
        deleted, and every answer waited for, `timeout` seconds in all;
        the connections are closed."""
        if self.finished:
            return
        self.finished = True
        deadline = time.monotonic() + timeout
        ready, self.ready = self.ready, None
        if ready is not None:
            try:
                answer = ready.sent.result(deadline)
            except LarderError as error:
                answer = None
                self.failures.append("making the store ahead for %s failed: %s" % (ready.name, error))
            if answer is not None and answer.status == 201:
                try:
                    store_id = json.loads(answer.body.decode("utf-8"))["id"]
                except (ValueError, KeyError, TypeError):
                    store_id = None
                if store_id:
                    self.deletes.append((self._send("DELETE", "/stores/" + _segment(store_id), None, self.client.timeout),
                                         store_id, "made ahead for %s and not taken" % ready.name))
        self.settle(deadline)
        for wire in self.wires:
            wire.close()
        self.wires = []

    def take_failures(self) -> List[str]:
        failures, self.failures = self.failures, []
        return failures


def settle_hook(ahead: Ahead) -> Callable[[], None]:
    """What the client calls before each request of its own: the deletes
    sent so far are answered first, so that a test sees the server as if
    they had been made synchronously. From the session's thread only (a
    test's own threads leave `ahead` alone)."""
    owner = threading.get_ident()

    def settle() -> None:
        if ahead.deletes and threading.get_ident() == owner:
            ahead.settle()
    return settle
