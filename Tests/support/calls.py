"""HTTP to a Larder server, for every Python script of this repository (the
black-box, deploy and package tests, bench/): one request, or many on one
keep-alive connection, answered as (status, body, headers).

    sys.path.insert(0, os.path.join(REPO, "Tests", "support"))
    from calls import call, Connection
    status, store, headers = call(base, "POST", "/stores", {"template": "gallery"})

A body that is bytes, str or a file goes as it is (with `content_type`);
anything else as JSON. The answer's body is parsed JSON when the server
says it is JSON, else bytes (None when empty); `raw=True` keeps the bytes.
An error status is an answer, not an exception; a broken connection raises.
"""
import collections
import http.client
import json
import os
import re
import urllib.parse

Answer = collections.namedtuple("Answer", "status body headers")


def _request(body, content_type, headers, token):
    headers = dict(headers or {})
    if token:
        headers["Authorization"] = "Bearer " + token
    if body is None or isinstance(body, (bytes, bytearray)) or hasattr(body, "read"):
        data = body
    elif isinstance(body, str):
        data = body.encode()
    else:
        data = json.dumps(body).encode()
    named = {name.lower() for name in headers}
    if data is not None and content_type and "content-type" not in named:
        headers["Content-Type"] = content_type
    if hasattr(data, "read") and "content-length" not in named:
        # A length, not chunks: the server takes an upload's size from it.
        headers["Content-Length"] = str(os.fstat(data.fileno()).st_size - data.tell())
    return data, headers


def _answer(response, payload, raw):
    body = payload
    if not raw:
        json_type = response.getheader("Content-Type", "").startswith("application/json")
        body = json.loads(payload) if payload and json_type else (payload or None)
    return Answer(response.status, body, response.msg)


class Connection:
    """One keep-alive connection to the server at `base` (http://host:port),
    opened on first use and again after the server or an error closed it.
    `server_closed` says whether the last answer ended the connection."""

    def __init__(self, base, timeout=120):
        parts = urllib.parse.urlsplit(base)
        self.host, self.port, self.prefix = parts.hostname, parts.port, parts.path.rstrip("/")
        self.timeout, self.http, self.server_closed = timeout, None, False

    def open(self, method, path, body=None, content_type="application/json", *, headers=None, token=None):
        """Sends one request and answers the http.client response, its body unread."""
        if self.http is None:
            self.http = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        data, headers = _request(body, content_type, headers, token)
        try:
            self.http.request(method, self.prefix + path, body=data, headers=headers)
            return self.http.getresponse()
        except (OSError, http.client.HTTPException):
            self.close()
            raise

    def call(self, method, path, body=None, content_type="application/json", *, headers=None, token=None, raw=False):
        response = self.open(method, path, body, content_type, headers=headers, token=token)
        try:
            payload = response.read()
        except (OSError, http.client.HTTPException):
            self.close()
            raise
        self.server_closed = response.will_close
        if self.server_closed:
            self.close()
        return _answer(response, payload, raw)

    def close(self):
        if self.http is not None:
            self.http.close()
        self.http = None

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()


def call(base, method, path, body=None, content_type="application/json", *, headers=None, token=None, raw=False, timeout=120):
    """One request on a connection of its own."""
    with Connection(base, timeout) as connection:
        return connection.call(method, path, body, content_type, headers=headers, token=token, raw=raw)


def download(base, path, each=None, timeout=600, chunk=1 << 20):
    """GET `path`, read as it streams: each chunk goes to `each` (when
    given) and is not kept. Answers (status, bytes read)."""
    with Connection(base, timeout) as connection:
        response, size = connection.open("GET", path), 0
        while True:
            data = response.read(chunk)
            if not data:
                return response.status, size
            size += len(data)
            if each:
                each(data)


def _number(text):
    value = float(text)
    return int(value) if value.is_integer() else value


def metrics(base, token=None):
    """The server's unlabelled metrics by name ({} for a server without them)."""
    text = call(base, "GET", "/metrics", token=token, raw=True).body.decode("utf-8", "replace")
    found = {}
    for name, value in re.findall(r"^(larder_\w+) (\S+)$", text, re.M):
        try:
            found[name] = _number(value)
        except ValueError:
            pass
    return found


def metric(base, name, token=None):
    """One unlabelled metric's value, None when the server has no such metric."""
    return metrics(base, token).get(name)
