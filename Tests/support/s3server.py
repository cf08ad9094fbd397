"""A real S3 API on loopback for the fleet-cache tests: moto in server mode,
with request signing switched on, so a request signed with a wrong secret,
an unknown key or a wrong session token is refused (403) as S3 would.

    sys.path.insert(0, os.path.join(REPO, "Tests", "support"))
    from s3server import S3Server
    s3 = S3Server(buckets=["fleet"])
    env = s3.larder_env()                   # AWS_* for a larder server, its endpoint this moto
    s3.list("fleet", "prefix/"), s3.get("fleet", key), s3.put("fleet", key, data), s3.delete("fleet", key)
    s3.stop()

moto (pinned below, with boto3) lives in a virtual environment outside the
repository, made once and reused, as scripts/schemathesis's:
$LARDER_MOTO_VENV, default ${XDG_CACHE_HOME:-$HOME/.cache}/larder/moto-venv,
made under a lock by scripts/lib/venv.sh (which installs python3-venv when
missing), from PyPI. The tests' own process needs nothing beyond the standard
library: their S3 requests are signed here (AWS Signature Version 4).

How signing is switched on (moto 5.2.1, moto/core/authorization.py and
moto_api/_internal/responses.py): moto checks signatures and IAM policies
once `settings.INITIAL_NO_AUTH_ACTION_COUNT` actions have gone unchecked
(infinite by default). The server starts with it infinite; boto3 creates,
through moto's IAM and STS, a user with an access key and an inline policy
allowing s3:*, a role allowed s3:* and a session of it (AssumeRole: a key
id, a secret and a session token), and the buckets; then
`POST /moto-api/reset-auth` with the plain number `0` as its body (not
JSON: moto parses it with float()) makes every later request checked. The
harness then checks that itself on a listing: the right key and the
session answer 200; a wrong secret, an unknown key and the session's key
without its token 403; the session with a wrong token 400 (S3's
InvalidToken); an unsigned request 500 (moto 5.2.1's check reads the
Authorization header unconditionally, so it cannot stand in for a public
bucket).

moto validates session tokens for AssumeRole sessions only
(iam/access_control.py, AssumedRoleAccessKey): their key ids start with
ASIA, and a request with such a key must carry x-amz-security-token equal
to the session's token. By the same source, GetSessionToken's credentials
are known to neither of its key lookups, so the harness issues AssumeRole
sessions.

`requests()` reads back what moto answered, from its log, so a test can
see which requests a larder server made (no listings; the object before
its manifest). One quirk: moto checks a signature against werkzeug's
re-quoted URL, where %2F in a query is "/" again, so this client signs
query values with "/" left as it is (real S3 wants %2F).
"""
import datetime
import hashlib
import hmac
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import http.client
import xml.etree.ElementTree as ElementTree

# A request line of werkzeug's log (coloured by status): "GET /bucket/key HTTP/1.1" 200 -
REQUEST_LINE = re.compile(r'"(?:\x1b\[[0-9;]*m)*([A-Z]+) (\S+) HTTP/[\d.]+(?:\x1b\[[0-9;]*m)*" (\d{3})')

MOTO_VERSION = "5.2.1"
BOTO3_VERSION = "1.44.8"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REGION = "us-east-1"
USER, ROLE = "larder-ci", "larder-ci-role"

# Run by the venv's Python: moto's app on a port the kernel picks, that port
# on stdout; it ends when its standard input closes (the test process went
# away, however it went) or on SIGTERM.
LAUNCHER = r"""
import os, sys, threading
from werkzeug.serving import make_server
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
app = DomainDispatcherApplication(create_backend_app)
server = make_server("127.0.0.1", 0, app, threaded=True)
os.environ["MOTO_PORT"] = str(server.port)
def orphaned():
    while sys.stdin.buffer.read(1):
        pass
    os._exit(0)
threading.Thread(target=orphaned, daemon=True).start()
import signal
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
print(server.port, flush=True)
server.serve_forever()
"""

# Run by the venv's Python against the endpoint while it checks nothing yet.
SETUP = r"""
import json, sys
import boto3
endpoint, region, user, role, buckets = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], json.loads(sys.argv[5])
session = boto3.session.Session(aws_access_key_id="setup", aws_secret_access_key="setup", region_name=region)
iam = session.client("iam", endpoint_url=endpoint)
s3 = session.client("s3", endpoint_url=endpoint)
sts = session.client("sts", endpoint_url=endpoint)
allow_s3 = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]})
iam.create_user(UserName=user)
iam.put_user_policy(UserName=user, PolicyName="s3-everything", PolicyDocument=allow_s3)
key = iam.create_access_key(UserName=user)["AccessKey"]
trust = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                    "Principal": {"AWS": "arn:aws:iam::123456789012:user/" + user}}]})
arn = iam.create_role(RoleName=role, AssumeRolePolicyDocument=trust)["Role"]["Arn"]
iam.put_role_policy(RoleName=role, PolicyName="s3-everything", PolicyDocument=allow_s3)
assumed = sts.assume_role(RoleArn=arn, RoleSessionName="larder-test", DurationSeconds=43200)["Credentials"]
for bucket in buckets:
    s3.create_bucket(Bucket=bucket)
print(json.dumps({"access_key_id": key["AccessKeyId"], "secret_access_key": key["SecretAccessKey"],
                  "session": {"access_key_id": assumed["AccessKeyId"], "secret_access_key": assumed["SecretAccessKey"],
                              "session_token": assumed["SessionToken"]}}))
"""


def venv_path():
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.environ.get("LARDER_MOTO_VENV") or os.path.join(cache, "larder", "moto-venv")


def moto_python():
    """The venv's python, the venv made first when it is missing or holds other versions."""
    venv = venv_path()
    script = r"""
set -euo pipefail
installed() {
    "$venv/bin/python" -c 'import importlib.metadata as m, sys, werkzeug, flask, moto.server
sys.exit(0 if (m.version("moto"), m.version("boto3")) == (sys.argv[1], sys.argv[2]) else 1)' "$MOTO_VERSION" "$BOTO3_VERSION" 2>/dev/null
}
. "$repo/scripts/lib/venv.sh"
larder_venv "$venv" python3 "moto $MOTO_VERSION" installed "moto[server]==$MOTO_VERSION" "boto3==$BOTO3_VERSION"
"""
    env = dict(os.environ, venv=venv, repo=REPO, MOTO_VERSION=MOTO_VERSION, BOTO3_VERSION=BOTO3_VERSION)
    # Its output (a line when it installs, pip's errors) goes to this process's stderr.
    done = subprocess.run(["bash", "-c", script], env=env, stdin=subprocess.DEVNULL, stdout=sys.stderr, timeout=900)
    if done.returncode != 0:
        raise RuntimeError("could not make the moto venv %s (its output is above)" % venv)
    return os.path.join(venv, "bin", "python")


def _sign(key, text):
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def _quote(text, safe="-_.~"):
    return urllib.parse.quote(text, safe=safe)


class S3Client:
    """Path-style S3 requests to `endpoint`, signed with SigV4 (or unsigned
    when `access_key_id` is None). Every call answers; only `get`, `put`,
    `delete` and `list` raise on an unexpected status."""

    def __init__(self, endpoint, access_key_id, secret_access_key, session_token=None, region=REGION, timeout=30):
        parts = urllib.parse.urlsplit(endpoint)
        self.host, self.port = parts.hostname, parts.port
        self.access_key_id, self.secret_access_key, self.session_token = access_key_id, secret_access_key, session_token
        self.region, self.timeout = region, timeout

    def request(self, method, bucket, key="", query=None, body=b"", headers=None):
        """(status, body bytes, headers) of one request."""
        path = "/" + bucket + ("/" + _quote(key, safe="-_.~/") if key else "")
        # "/" left as it is in query values: moto checks the signature against
        # werkzeug's re-quoted URL, where %2F has become "/" again.
        canonical_query = "&".join("%s=%s" % (_quote(k), _quote(v, safe="-_.~/")) for k, v in sorted((query or {}).items()))
        headers = dict(headers or {})
        host = "%s:%d" % (self.host, self.port)
        if self.access_key_id is not None:
            now = datetime.datetime.now(datetime.timezone.utc)
            stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
            payload = hashlib.sha256(body).hexdigest()
            signed = {"host": host, "x-amz-content-sha256": payload, "x-amz-date": stamp}
            if self.session_token:
                signed["x-amz-security-token"] = self.session_token
            names = ";".join(sorted(signed))
            canonical = "\n".join([method, path, canonical_query]
                                  + ["%s:%s" % (name, signed[name]) for name in sorted(signed)] + ["", names, payload])
            scope = "%s/%s/s3/aws4_request" % (day, self.region)
            to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
            key_bytes = _sign(_sign(_sign(_sign(("AWS4" + self.secret_access_key).encode(), day), self.region), "s3"), "aws4_request")
            signature = hmac.new(key_bytes, to_sign.encode(), hashlib.sha256).hexdigest()
            headers.update({name: value for name, value in signed.items() if name != "host"})
            headers["Authorization"] = "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s" % (
                self.access_key_id, scope, names, signature)
        connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            connection.request(method, path + ("?" + canonical_query if canonical_query else ""), body=body or None, headers=headers)
            response = connection.getresponse()
            return response.status, response.read(), response.msg
        finally:
            connection.close()

    def _expect(self, answer, statuses, what):
        if answer[0] not in statuses:
            raise AssertionError("S3 %s: %d %s" % (what, answer[0], answer[1][:500].decode("utf-8", "replace")))
        return answer

    def list(self, bucket, prefix=""):
        """Every key under `prefix`, sorted."""
        keys, token = [], None
        while True:
            query = {"list-type": "2", "prefix": prefix}
            if token:
                query["continuation-token"] = token
            status, body, _ = self._expect(self.request("GET", bucket, query=query), (200,), "list %s/%s" % (bucket, prefix))
            tree = ElementTree.fromstring(body)
            ns = tree.tag.split("}")[0] + "}" if tree.tag.startswith("{") else ""
            keys += [element.text for element in tree.iter(ns + "Key")]
            truncated = tree.find(ns + "IsTruncated")
            token_element = tree.find(ns + "NextContinuationToken")
            if truncated is None or truncated.text != "true" or token_element is None:
                return sorted(keys)
            token = token_element.text

    def get(self, bucket, key):
        """The object's bytes, None when there is none."""
        status, body, _ = self._expect(self.request("GET", bucket, key), (200, 404), "get %s/%s" % (bucket, key))
        return body if status == 200 else None

    def put(self, bucket, key, data):
        self._expect(self.request("PUT", bucket, key, body=data), (200,), "put %s/%s" % (bucket, key))

    def delete(self, bucket, key):
        self._expect(self.request("DELETE", bucket, key), (200, 204), "delete %s/%s" % (bucket, key))

    def snapshot(self, bucket, prefix=""):
        """{key: bytes} of every object under `prefix`."""
        return {key: self.get(bucket, key) for key in self.list(bucket, prefix)}


class S3Server:
    """moto on a free loopback port, with the buckets made and signing on.
    `endpoint`, `access_key_id`, `secret_access_key`, `session` (an AssumeRole
    session: access_key_id, secret_access_key, session_token), `client()`
    (this S3Client with the user's key; its methods are this object's too),
    `larder_env()`, `stop()`."""

    def __init__(self, buckets=("fleet",), ready_timeout=60):
        self.buckets = list(buckets)
        python = moto_python()
        self.log = tempfile.NamedTemporaryFile(prefix="moto-log-", suffix=".txt", delete=False)
        self.process = subprocess.Popen([python, "-c", LAUNCHER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.log, env=self._moto_env())
        try:
            self.port = int(self._first_line(ready_timeout))
            self.endpoint = "http://127.0.0.1:%d" % self.port
            self._wait_for_answer(ready_timeout)
            done = subprocess.run([python, "-c", SETUP, self.endpoint, REGION, USER, ROLE, json.dumps(self.buckets)],
                                  env=self._moto_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
            if done.returncode != 0:
                raise RuntimeError("moto setup failed: %s%s" % (done.stdout, done.stderr))
            made = json.loads(done.stdout)
            self.access_key_id, self.secret_access_key, self.session = made["access_key_id"], made["secret_access_key"], made["session"]
            self._moto_api("POST", "/moto-api/reset-auth", b"0")
            self._check_signing()
        except BaseException:
            self.stop()
            raise

    @staticmethod
    def _moto_env():
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "INITIAL_NO_AUTH_ACTION_COUNT"}
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def _first_line(self, timeout):
        fd, buffer, deadline = self.process.stdout.fileno(), b"", time.monotonic() + timeout
        while b"\n" not in buffer and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                chunk = os.read(fd, 64)
                if not chunk:
                    break
                buffer += chunk
        line = buffer.split(b"\n", 1)[0].strip()
        if not line.isdigit():
            raise RuntimeError("moto did not start: %r; log: %s" % (buffer, self.log_text()[-3000:]))
        return line.decode()

    def _moto_api(self, method, path, body=None):
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.request(method, path, body=body)
            response = connection.getresponse()
            payload = response.read()
            if response.status != 200:
                raise RuntimeError("moto %s %s: %d %r" % (method, path, response.status, payload[:300]))
            return payload
        finally:
            connection.close()

    def _wait_for_answer(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._moto_api("GET", "/moto-api/data.json")
                return
            except (OSError, RuntimeError):
                if time.monotonic() >= deadline or self.process.poll() is not None:
                    raise RuntimeError("moto did not answer on %s; log: %s" % (self.endpoint, self.log_text()[-3000:]))
                time.sleep(0.1)

    def _check_signing(self):
        """Signing is on: only the right key, secret and token get in."""
        bucket = self.buckets[0]
        session = self.session
        cases = [
            ("the user's key", self.client(), 200),
            ("the session", self.client(**session), 200),
            ("a wrong secret", self.client(secret_access_key=self.secret_access_key[:-1] + ("A" if self.secret_access_key[-1] != "A" else "B")), 403),
            ("an unknown key", self.client(access_key_id="AKIAUNKNOWNUNKNOWN00", secret_access_key="x" * 40), 403),
            # moto 5.2.1 cannot check an unsigned request once signing is on: it
            # answers 500 (a KeyError on the Authorization header), still a refusal.
            ("no signature", S3Client(self.endpoint, None, None), 500),
            ("the session without its token", self.client(access_key_id=session["access_key_id"], secret_access_key=session["secret_access_key"]), 403),
            # S3's InvalidToken is a 400.
            ("the session with a wrong token", self.client(**dict(session, session_token=session["session_token"][:-4] + "AAAA")), 400),
        ]
        for what, client, expected in cases:
            status = client.request("GET", bucket, query={"list-type": "2"})[0]
            if status != expected:
                raise RuntimeError("moto's signing check: a listing with %s answered %d, not %d" % (what, status, expected))

    def client(self, access_key_id=None, secret_access_key=None, session_token=None):
        """An S3Client of this endpoint, by default with the user's key."""
        return S3Client(self.endpoint, access_key_id or self.access_key_id, secret_access_key or self.secret_access_key, session_token)

    def __getattr__(self, name):
        # list, get, put, delete, snapshot, request: the user's client's.
        if name in ("list", "get", "put", "delete", "snapshot", "request"):
            return getattr(self.client(), name)
        raise AttributeError(name)

    def larder_env(self, base=None, access_key_id=None, secret_access_key=None, session_token=None, endpoint=None, **extra):
        """An environment for a larder server using this endpoint: `base`
        (default this process's environment) without any AWS_ or LARDER_
        variable, then the credentials (the user's unless given), the
        region and the endpoint (this moto unless given), then `extra`."""
        env = {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith(("AWS_", "LARDER_"))}
        env.update(AWS_ACCESS_KEY_ID=access_key_id or self.access_key_id,
                   AWS_SECRET_ACCESS_KEY=secret_access_key or self.secret_access_key,
                   AWS_REGION=REGION, AWS_ENDPOINT_URL=endpoint or self.endpoint)
        if session_token:
            env["AWS_SESSION_TOKEN"] = session_token
        env.update(extra)
        return env

    def session_env(self, base=None, **extra):
        """larder_env with the AssumeRole session's key, secret and AWS_SESSION_TOKEN."""
        return self.larder_env(base, **dict(self.session), **extra)

    def requests(self):
        """Every request moto has answered so far, in order: (method, path
        with its query, status), from its log (werkzeug writes each line
        before the answer goes out, so a request that was answered is in it)."""
        found = []
        for line in self.log_text().splitlines():
            match = REQUEST_LINE.search(line)
            if match:
                found.append((match.group(1), match.group(2), int(match.group(3))))
        return found

    def log_text(self):
        try:
            with open(self.log.name, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        for stream in (self.process.stdin, self.process.stdout):
            if stream:
                stream.close()
        self.log.close()
        try:
            os.unlink(self.log.name)
        except OSError:
            pass


if __name__ == "__main__":
    # python3 Tests/support/s3server.py: starts moto, checks signing, puts, lists, gets, deletes, stops.
    began = time.monotonic()
    server = S3Server(buckets=["fleet", "other"])
    try:
        print("moto %s on %s, signing on, in %.1f s" % (MOTO_VERSION, server.endpoint, time.monotonic() - began))
        server.put("fleet", "a/b/c.json", b'{"x": 1}')
        server.client(**server.session).put("fleet", "a/d.bin", bytes(range(256)) * 4000)
        assert server.list("fleet", "a/") == ["a/b/c.json", "a/d.bin"], server.list("fleet", "a/")
        assert server.list("fleet", "a/b/") == ["a/b/c.json"]
        assert server.get("fleet", "a/d.bin") == bytes(range(256)) * 4000
        assert server.get("fleet", "missing") is None
        wrong = server.client(secret_access_key="wrong" * 8)
        assert wrong.request("GET", "fleet", "a/d.bin")[0] == 403
        assert wrong.request("PUT", "fleet", "a/e.bin", body=b"x")[0] == 403
        assert server.get("fleet", "a/e.bin") is None
        server.delete("fleet", "a/b/c.json")
        assert server.list("fleet") == ["a/d.bin"]
        assert server.list("other") == []
        assert ("GET", "/fleet/a/d.bin", 200) in server.requests(), server.requests()
        env = server.larder_env()
        assert env["AWS_ENDPOINT_URL"] == server.endpoint and env["AWS_REGION"] == REGION
        print("s3server: put, list, get, delete and the signing checks passed")
    finally:
        server.stop()
    assert server.process.poll() is not None
