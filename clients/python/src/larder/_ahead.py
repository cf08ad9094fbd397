"""What the pytest plugin does off a test's critical path (issue 48): the
next test's store made while this test runs, and a passing test's store
deleted while the next one runs.

No threads: the requests are written to a keep-alive connection at once,
and their answers read later, when they are needed (the next test takes its
store; the oldest of too many deletes; the session's end), by which time
the server has long answered them. So the test process pays for writing a
request and reading an answer that is already there, not for the round
trip, nor for the server's work. A passing test's delete waits for the
next test's request for a store and goes with it, in one write (HTTP/1.1
pipelining: the server answers them in order): each write to the server
wakes it, which on a busy machine costs a test more than the rest. The
requests are plain HTTP/1.1 of a few lines, read by the small reader below:
http.client's header parsing alone costs more than the rest of a request
here.

`Ahead` is one session's (one pytest-xdist worker's): local mode and an
http:// URL only; the plugin does everything synchronously otherwise.
"""
from __future__ import annotations

import collections
import datetime
import http.client
import json
import socket
import threading
import time
import urllib.parse
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

from ._client import _USER_AGENT, Client, LarderError, Store, _broken, _error_from, _segment, _STALE, _transport_error

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
    """One keep-alive HTTP/1.1 connection: requests written together, their
    answers read later, in order; then the next requests."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.sock: Optional[socket.socket] = None
        self.buffer = b""
        self.used = False  # has carried an answer: a write may find it closed by the server since
        self.outstanding: Deque["_Sent"] = collections.deque()  # written, not yet answered, in order
        self.reused = False  # the last write went to a connection that had carried answers
        self.answered = 0  # answers read since the last write

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock, self.buffer, self.used = None, b"", False

    def write(self, data: bytes, timeout: float) -> None:
        self.reused = self.sock is not None and self.used
        self.answered = 0
        if self.sock is None:
            self.sock = socket.create_connection((self.host, self.port), timeout=timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(timeout)
        self.sock.sendall(data)

    def _fill(self) -> None:
        assert self.sock is not None
        chunk = self.sock.recv(65536)
        if not chunk:
            raise http.client.RemoteDisconnected("the server closed the connection")
        self.buffer += chunk

    def read(self, timeout: float, head: bool = False) -> _Answer:
        """The next answer."""
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
        closing = (answer.header("Connection") or "").lower() == "close" or parts[0] == "HTTP/1.0"
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
            body, self.buffer, closing = self.buffer, b"", True
        answer.body = body
        self.used = True
        self.answered += 1
        if closing:
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

    def __init__(self, ahead: "Ahead", method: str, data: bytes, limit: float, what: str):
        self.ahead, self.method, self.data, self.limit, self.what = ahead, method, data, limit, what
        self.wire: Optional[_Wire] = None
        self.answer: Optional[_Answer] = None
        self.failure: Optional[LarderError] = None
        self.sent_at = time.monotonic()

    def done(self) -> bool:
        return self.answer is not None or self.failure is not None

    def result(self, deadline: Optional[float] = None) -> _Answer:
        """The answer (any status); raises `LarderError` when none came.
        The answers to the requests written before it on its connection
        are read first."""
        while not self.done():
            assert self.wire is not None and self.wire.outstanding
            self.ahead._read_next(self.wire, deadline)
        if self.failure is not None:
            raise self.failure
        assert self.answer is not None
        return self.answer


def _lifetime(info: Dict[str, Any]) -> float:
    """A store's time to live in seconds, from its answer (infinite when it says none)."""
    try:
        created, expires = (datetime.datetime.fromisoformat(str(info[field]).replace("Z", "+00:00"))
                            for field in ("created_at", "expires_at"))
    except (KeyError, ValueError, TypeError):
        return float("inf")
    return (expires - created).total_seconds()


def _transport(error: BaseException, what: str, url: str, limit: float) -> LarderError:
    """As the client says a failure below HTTP; an answer the reader cannot parse as a broken connection."""
    return _transport_error(error, what, url, limit) or _broken(error, what, url)


class Ready:
    """A store asked for ahead: for the test `name` (its node id), as `key`
    (what the test will ask for) says."""

    def __init__(self, name: str, key: Any, sent: _Sent):
        self.name, self.key, self.sent = name, key, sent


class Ahead:
    """A session's requests off the critical path: at most one store made
    ahead (`prepare`, `take`) and at most MAX_PENDING_DELETES deletes
    unanswered (`delete`: sent with the next `prepare`, or by `flush`).
    What failed is kept in `failures` (one line each) until the plugin
    reports it; `settle` waits for the deletes and `finish`, at the
    session's end, for everything, deleting the store made ahead that no
    test took."""

    def __init__(self, client: Client):
        self.client = client
        parts = urllib.parse.urlsplit(client.url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.host_header = parts.netloc.rpartition("@")[2]
        self.prefix = parts.path.rstrip("/")
        self.wires: List[_Wire] = []
        self.ready: Optional[Ready] = None
        self.queued: List[Tuple[str, str]] = []  # deletes not yet sent: (store id, whose)
        self.deletes: Deque[Tuple[_Sent, str, str]] = collections.deque()  # sent: (request, store id, whose)
        self.failures: List[str] = []
        self.finished = False

    @staticmethod
    def usable(client: Client) -> bool:
        """Local mode over plain HTTP: what `Ahead` works with."""
        return not client.remote and client.url.startswith("http://")

    # --- the connections -------------------------------------------------------

    def _request(self, method: str, path: str, body: Optional[Dict[str, Any]], limit: float) -> _Sent:
        lines = ["%s %s HTTP/1.1" % (method, self.prefix + path), "Host: " + self.host_header,
                 "Accept: application/json", "User-Agent: " + _USER_AGENT]
        if self.client.token:
            lines.append("Authorization: Bearer " + self.client.token)
        payload = b""
        if body is not None:
            payload = json.dumps(body).encode("utf-8")
            lines.append("Content-Type: application/json")
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append("Content-Length: %d" % len(payload))
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8") + payload
        return _Sent(self, method, data, limit, "%s %s" % (method, path))

    def _write(self, requests: List[_Sent]) -> None:
        """Writes `requests` together on an idle connection (pipelined);
        on a failure to write, each has it as its failure."""
        wire = self.wires.pop() if self.wires else _Wire(self.host, self.port)
        data = b"".join(sent.data for sent in requests)
        limit = max(sent.limit for sent in requests)
        for attempt in (1, 2):
            carried = wire.used
            try:
                wire.write(data, limit)
            except OSError as error:
                wire.close()
                # A connection the server closed while it idled: once more on a new one.
                if attempt == 1 and carried and isinstance(error, _STALE):
                    continue
                for sent in requests:
                    sent.failure = _transport(error, sent.what, self.client.url, limit)
                return
            break
        for sent in requests:
            sent.wire = wire
        wire.outstanding.extend(requests)

    def _read_next(self, wire: _Wire, deadline: Optional[float]) -> None:
        """Reads the answer to the first request `wire` has outstanding."""
        sent = wire.outstanding[0]
        limit = sent.limit if deadline is None else max(0.001, min(sent.limit, deadline - time.monotonic()))
        try:
            if wire.sock is None:
                # The server closed the connection after the answer before
                # (Connection: close): it did not run the requests after it.
                wire.write(b"".join(s.data for s in wire.outstanding), limit)
            try:
                sent.answer = wire.read(limit, head=sent.method == "HEAD")
            except _STALE:
                if not (wire.reused and wire.answered == 0):
                    raise
                # Closed by the server before these requests reached it (it idled
                # past its limit): none of them ran; all once more, on a new one.
                wire.close()
                wire.write(b"".join(s.data for s in wire.outstanding), limit)
                sent.answer = wire.read(limit, head=sent.method == "HEAD")
        except (OSError, http.client.HTTPException, ValueError) as error:
            # This answer, and the ones after it on this connection, cannot be read.
            wire.close()
            for lost in wire.outstanding:
                lost.failure = _transport(error, lost.what, self.client.url, limit)
            wire.outstanding.clear()
            return
        wire.outstanding.popleft()
        if not wire.outstanding:
            if wire.sock is not None and len(self.wires) < MAX_PENDING_DELETES + 2:
                self.wires.append(wire)
            else:
                wire.close()

    # --- the store made ahead ---------------------------------------------------

    def prepare(self, name: str, key: Any, options: Dict[str, Any]) -> None:
        """Asks for the store of the test `name`, made with
        `create_store(**options)`, and returns at once; `take(key)` gives
        it. The deletes queued go with it."""
        self._discard_ready()
        body, limit = self.client._create_body(**options)
        create = self._request("POST", "/stores", body, limit or self.client.timeout)
        self._flush([create])
        self.ready = Ready(name, key, create)

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
        # Well within its own time to live too (a ttl_seconds, or a server's short --ttl-seconds).
        if time.monotonic() - ready.sent.sent_at > _lifetime(info) / 5:
            self._discard(ready)
            return None
        return self.client._new_store(info)

    def _discard_ready(self) -> None:
        ready, self.ready = self.ready, None
        if ready is not None:
            self._discard(ready)

    def _discard(self, ready: Ready, deadline: Optional[float] = None) -> None:
        """Deletes (queues the delete of) a store made ahead that no test will take."""
        try:
            answer = ready.sent.result(deadline)
        except LarderError as error:
            if error.status == 0 and deadline is not None:  # it may yet be made, and left behind
                self.failures.append("making the store ahead for %s: %s" % (ready.name, error))
            return
        if answer.status != 201:
            return  # none was made
        try:
            store_id = json.loads(answer.body.decode("utf-8"))["id"]
        except (ValueError, KeyError, TypeError):
            return
        self.delete(store_id, "made ahead for %s and not taken" % ready.name)

    # --- deletes ----------------------------------------------------------------

    def delete(self, store_id: str, whose: str) -> None:
        """Queues DELETE /stores/{id}: it goes with the next `prepare`, or
        with `flush`, and its answer is read later; when MAX_PENDING_DELETES
        are unanswered, the oldest is read first."""
        while self.deletes and len(self.deletes) + len(self.queued) >= MAX_PENDING_DELETES:
            self._reap(*self.deletes.popleft())
        if len(self.queued) >= MAX_PENDING_DELETES:
            self.flush()
            self._reap(*self.deletes.popleft())
        self.queued.append((store_id, whose))

    def flush(self) -> None:
        """Sends the deletes queued."""
        self._flush([])

    def _flush(self, more: List[_Sent]) -> None:
        queued, self.queued = self.queued, []
        sent = [(self._request("DELETE", "/stores/" + _segment(store_id), None, self.client.timeout), store_id, whose)
                for store_id, whose in queued]
        if sent or more:
            self._write([request for request, _, _ in sent] + more)
        self.deletes.extend(sent)

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
        """Sends the deletes queued and waits for every delete (not for the
        store made ahead)."""
        self.flush()
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
            self._discard(ready, deadline)
        self.settle(deadline)
        for wire in self.wires:
            wire.close()
        self.wires = []

    def take_failures(self) -> List[str]:
        failures, self.failures = self.failures, []
        return failures


def settle_hook(ahead: Ahead) -> Callable[[], None]:
    """What the client calls before each request of its own: the deletes
    queued and sent so far are answered first, so that a test sees the
    server as if they had been made while their tests waited. From the
    session's thread only (a test's own threads leave `ahead` alone)."""
    owner = threading.get_ident()

    def settle() -> None:
        if (ahead.deletes or ahead.queued) and threading.get_ident() == owner:
            ahead.settle()
    return settle
