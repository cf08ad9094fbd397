#!/usr/bin/env python3
"""The recipes in deploy/, tried for what can be tried without Docker, a CI
service or a cluster:

- every YAML file parses, and its pieces fit each other: the server's
  address is where the tests look, the root is on a mount the tests share
  at the same path, the token on both sides is one, the JUnit file written
  is the one reported, the artifacts' folder is the one uploaded;
- the commands each recipe runs (health checks and probes, `larder check`,
  wait loops) are run here against a real server started with the
  recipe's own settings on top of the image's (deploy/Dockerfile's ENV),
  its paths moved under a scratch folder and its port to a free one;
- every LARDER_ and AWS_ variable a recipe sets is one the binary reads
  (`larder serve --help` names it) or a client's, and docs/fleet.md names
  the fleet's;
- the fleet cache (docs/fleet.md) as each recipe sets it up, for each kind
  of run (GitHub: a push and a fork's pull request; GitLab: a pipeline
  with the protected keys and one without; Kubernetes: the shared server
  with its Secret): a server started with those settings, its buckets
  those the recipe names in a real S3 API on loopback (moto with request
  signing on, Tests/support/s3server.py; one per test class), publishes
  when it should, never when it should not, hands a store out either way,
  uploads a kept store's artifact where the recipe says when it has a key,
  and never shows a key.

    python3 Tests/deploy/test_recipes.py BINARY
"""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import unittest
import urllib.parse
import xml.etree.ElementTree as ElementTree

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from calls import call, metrics  # noqa: E402
from processes import REPO, free_port, larder_binary, listening, readable_log, scratch_folder, stop, wait_until  # noqa: E402
from s3server import S3Server  # noqa: E402

try:
    import yaml
except ImportError:
    raise SystemExit("test_recipes: PyYAML is missing (scripts/setup installs python3-yaml)")

DEPLOY = os.path.join(REPO, "deploy")
BINARY = larder_binary()
# Variables the clients and their test helpers read (clients/README.md), not the server.
CLIENT_VARIABLES = {"LARDER_URL", "LARDER_TOKEN", "LARDER_ARTIFACTS", "LARDER_RUN", "LARDER_BINARY"}
# Variables of a recipe that name something of the recipe itself (GitLab's image).
RECIPE_VARIABLES = {"LARDER_IMAGE"}
# The fleet's settings (docs/fleet.md).
FLEET_VARIABLE = re.compile(r"LARDER_(CACHE_(URL|READ_ONLY|TIMEOUT_MS|DIR)|ARTIFACTS_(URL|RUN))|AWS_\w+")


def load(name):
    with open(os.path.join(DEPLOY, name)) as f:
        return list(yaml.safe_load_all(f))


def serve_help():
    return subprocess.run([BINARY, "serve", "--help"], capture_output=True, text=True, timeout=60).stdout


def server_variables(help_text):
    """LARDER_ and the name of each setting `larder serve --help` lists."""
    return {"LARDER_" + name.upper().replace("-", "_") for name in re.findall(r"^  --([a-z0-9-]+)", help_text, re.M)}


class GitHubExpression:
    """${{ ... }} as GitHub Actions evaluates it, for what the recipes use:
    contexts, literals, !, ==, !=, && and || (which answer an operand), and
    parentheses. A missing property is null; null reads as ''."""

    TOKEN = re.compile(r"\s*(?:(?P<number>\d+(?:\.\d+)?)|(?P<string>'(?:[^']|'')*')|(?P<op>==|!=|&&|\|\||[!()])|(?P<word>[A-Za-z_][\w.-]*))")

    def __init__(self, text, contexts):
        self.tokens, at = [], 0
        while text[at:].strip():
            match = self.TOKEN.match(text, at)
            if not match:
                raise ValueError("cannot read the expression %r at %d" % (text, at))
            self.tokens.append((match.lastgroup, match.group(match.lastgroup)))
            at = match.end()
        self.contexts, self.at = contexts, 0

    @classmethod
    def fill(cls, value, contexts):
        """`value` with every ${{ ... }} in it replaced by its value as text."""
        return re.sub(r"\$\{\{(.*?)\}\}", lambda m: cls.text(cls(m.group(1), contexts).evaluate()), str(value))

    @staticmethod
    def text(value):
        return "" if value is None else ("true" if value else "false") if isinstance(value, bool) else str(value)

    @staticmethod
    def number(value):
        if value is None or isinstance(value, bool):
            return float(bool(value))
        try:
            return float(value)
        except ValueError:
            return float("nan")

    @classmethod
    def equal(cls, a, b):
        if type(a) is type(b):
            return a.lower() == b.lower() if isinstance(a, str) else a == b
        return cls.number(a) == cls.number(b)

    def evaluate(self):
        value = self.either()
        if self.at != len(self.tokens):
            raise ValueError("unexpected %r" % (self.tokens[self.at][1],))
        return value

    def peek(self):
        return self.tokens[self.at][1] if self.at < len(self.tokens) else None

    def either(self):
        value = self.both()
        while self.peek() == "||":
            self.at += 1
            other = self.both()
            value = value if value else other
        return value

    def both(self):
        value = self.negation()
        while self.peek() == "&&":
            self.at += 1
            other = self.negation()
            value = other if value else value
        return value

    def negation(self):
        if self.peek() == "!":
            self.at += 1
            return not self.negation()
        return self.comparison()

    def comparison(self):
        value = self.primary()
        if self.peek() in ("==", "!="):
            op = self.peek()
            self.at += 1
            same = self.equal(value, self.primary())
            value = same if op == "==" else not same
        return value

    def primary(self):
        kind, text = self.tokens[self.at]
        self.at += 1
        if text == "(":
            value = self.either()
            self.at += 1
            return value
        if kind == "number":
            return float(text)
        if kind == "string":
            return text[1:-1].replace("''", "'")
        if kind == "word" and text in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[text]
        value = self.contexts
        for part in text.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return value


def bucket_url(url):
    """(bucket, prefix) of s3://BUCKET/PREFIX."""
    bucket, _, prefix = url[len("s3://"):].partition("/")
    return bucket, prefix.strip("/")


def recipe_buckets(name):
    """The buckets a recipe names (s3://BUCKET/...), which the test's S3 server holds."""
    with open(os.path.join(DEPLOY, name)) as f:
        return sorted(set(re.findall(r"\bs3://([a-z0-9][a-z0-9.-]+[a-z0-9])", f.read())))


def image_environment():
    """The ENV lines of deploy/Dockerfile's last stage, as the container starts with them."""
    with open(os.path.join(DEPLOY, "Dockerfile")) as f:
        text = f.read().replace("\\\n", " ")
    stage = re.split(r"^FROM ", text, flags=re.M)[-1]
    env = {}
    for line in re.findall(r"^ENV (.*)$", stage, re.M):
        env.update(dict(pair.split("=", 1) for pair in shlex.split(line)))
    return env


def image_group():
    with open(os.path.join(DEPLOY, "Dockerfile")) as f:
        return int(re.search(r"groupadd .*--gid (\d+) larder", f.read()).group(1))


def url_port(url):
    return urllib.parse.urlsplit(url).port


class Scratch(unittest.TestCase):
    """A scratch folder standing for the container's and the runner's file
    system, `larder` on PATH, and servers started with a recipe's settings."""

    def setUp(self):
        self.scratch = scratch_folder(self, "larder-recipes-", mode=0o755)
        self.bin = os.path.join(self.scratch, "bin")
        os.mkdir(self.bin)
        os.symlink(BINARY, os.path.join(self.bin, "larder"))
        self.base_env = {"PATH": self.bin + ":/usr/local/bin:/usr/bin:/bin", "HOME": self.scratch}

    def place(self, path):
        """Where a recipe's absolute path lives here."""
        return os.path.join(self.scratch, path.lstrip("/"))

    def workspace(self, path="/workspace"):
        """A checkout of the project: the recipes' tests run in one (fixtures only)."""
        folder = self.place(path)
        os.makedirs(folder, exist_ok=True)
        shutil.copytree(os.path.join(REPO, "fixtures"), os.path.join(folder, "fixtures"), dirs_exist_ok=True)
        return folder

    def container_env(self, settings, paths=("LARDER_ROOT", "LARDER_FIXTURES")):
        """The image's environment with the recipe's settings on top; paths
        moved under the scratch folder, the port to a free one."""
        env = dict(image_environment(), **{k: str(v) for k, v in settings.items()})
        self.assertEqual(env.get("LARDER_PORT", "7464"), "7464", "the recipes expect the image's port")
        for name in paths:
            if name in env and not env[name].startswith(self.scratch):
                env[name] = self.place(env[name])
        env["LARDER_PORT"] = str(free_port())
        env["LARDER_LOG_LEVEL"] = "error"
        env.pop("LARDER_STORE_GROUP", None)  # the group larder exists in the image, not always here
        # No test reaches a real bucket: a recipe's is a closed port here, unless a test gives its own.
        env["AWS_ENDPOINT_URL_S3"] = "http://127.0.0.1:%d" % free_port()
        return dict(self.base_env, **env)

    def serve(self, env):
        process = subprocess.Popen(["larder", "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(self.stop, process)
        try:
            listening(process, "the server with the recipe's settings")
        except RuntimeError as error:
            self.fail(str(error))
        return process, "http://127.0.0.1:" + env["LARDER_PORT"]

    stop = staticmethod(stop)

    # The recipe whose buckets the class's S3 server holds (None: the class has none).
    BUCKETS_OF = None
    s3 = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if cls.BUCKETS_OF:
            # One real S3 API for the class's tests (moto, signing on), its buckets those the recipe names.
            cls.s3 = S3Server(buckets=recipe_buckets(cls.BUCKETS_OF))

    @classmethod
    def tearDownClass(cls):
        if cls.s3:
            cls.s3.stop()
            cls.s3 = None
        super().tearDownClass()

    def fleet_server(self, settings):
        """A server started with `settings` (container_env's), on a root and
        port of its own, its bucket the class's S3 server: (process, base
        URL). It logs every request, so that the log can be searched for keys."""
        n = len(getattr(self, "fleet_logs", []))
        self.fleet_logs = getattr(self, "fleet_logs", []) + [os.path.join(self.scratch, "fleet-%d.log" % n)]
        env = dict(settings, AWS_ENDPOINT_URL_S3=self.s3.endpoint, LARDER_LOG_LEVEL="info",
                   LARDER_PORT=str(free_port()), LARDER_ROOT=os.path.join(self.scratch, "fleet-root-%d" % n))
        with open(self.fleet_logs[-1], "w") as log:
            process = subprocess.Popen(["larder", "serve"], env=env, stdout=subprocess.PIPE, stderr=log)
        self.addCleanup(self.stop, process)
        try:
            listening(process, "the server with the recipe's fleet settings")
        except RuntimeError as error:
            self.fail("%s\n%s" % (error, self.fleet_log_text()))
        return process, "http://127.0.0.1:" + env["LARDER_PORT"]

    def fleet_log_text(self):
        text = ""
        for path in getattr(self, "fleet_logs", []):
            with open(path, errors="replace") as f:
                text += f.read()
        return text

    def empty(self, url):
        """Removes what an earlier test of the class left under the URL's prefix: each run starts from empty buckets."""
        bucket, prefix = bucket_url(url)
        for key in self.s3.list(bucket, prefix + "/"):
            self.s3.delete(bucket, key)

    def assert_fleet(self, settings, token, signed, run):
        """The fleet cache as a recipe's `settings` set it up for one kind
        of run, its buckets the class's S3 server's (private: moto refuses
        an unsigned request with 500). `signed`: whether the run has the
        bucket's keys. The server says what it uses in /health (without
        keys: read-only, no artifacts), hands out a store whatever the
        bucket answers, publishes it when it has keys and is not read-only
        (and then another server with the same settings builds nothing),
        publishes nothing otherwise, uploads a kept store's artifact to
        PREFIX/RUN/NAME.zip (`run` a pattern) when it has keys and nothing
        when it has none, and shows no secret anywhere. What the servers
        asked of the bucket is S3Server.requests(): this test asks the
        bucket nothing itself until the servers have stopped."""
        s3 = self.s3
        cache_url, artifacts = settings["LARDER_CACHE_URL"], settings.get("LARDER_ARTIFACTS_URL") or None
        cache_bucket, cache_prefix = bucket_url(cache_url)
        read_only = settings.get("LARDER_CACHE_READ_ONLY", "false") == "true"
        publishes = signed and not read_only
        for url in filter(None, [cache_url, artifacts]):
            self.empty(url)
        mark = len(s3.requests())
        first, base = self.fleet_server(settings)

        status, health, _ = call(base, "GET", "/health")
        self.assertEqual(status, 200)
        self.assertEqual(health.get("cache"), {"url": cache_url, "read_only": read_only or not signed,
                                               "artifacts_url": artifacts if signed else None})
        status, store, _ = call(base, "POST", "/stores", {"template": "gallery", "label": "4242/tests/test_one"}, token=token)
        self.assertEqual(status, 201, store)
        manifest = "/%s/%s/manifests/([0-9a-f]{64})\\.json" % (re.escape(cache_bucket), re.escape(cache_prefix))
        asked = wait_until(lambda: [r for r in s3.requests()[mark:] if r[0] == "GET" and re.fullmatch(manifest, r[1])], 30)
        self.assertTrue(asked, "the server never asked the bucket for the template's manifest: %s" % s3.requests()[mark:])
        counted = metrics(base, token)
        built = counted.get("larder_template_builds_total") or 0
        # The bucket was empty (a miss), or refused the unsigned request (an error): built here.
        self.assertGreaterEqual(built, 1, counted)
        self.assertGreaterEqual(counted.get("larder_fleet_cache_misses_total" if signed else "larder_fleet_cache_errors_total") or 0, 1, counted)
        shown = [json.dumps(health)]
        if publishes:
            everything = wait_until(lambda: metrics(base, token).get("larder_fleet_cache_published_total") == built, 30)
            self.assertTrue(everything, "not all published: %s\n%s" % (metrics(base, token), self.fleet_log_text()[-3000:]))
            # Another runner with the same settings builds nothing.
            mark_other = len(s3.requests())
            second, other = self.fleet_server(settings)
            status, copy, _ = call(other, "POST", "/stores", {"template": "gallery"}, token=token)
            self.assertEqual(status, 201, copy)
            counted = metrics(other, token)
            self.assertGreaterEqual(counted.get("larder_fleet_cache_hits_total") or 0, 1, counted)
            self.assertEqual(counted.get("larder_template_builds_total"), 0, counted)
            shown.append(call(other, "GET", "/metrics", token=token, raw=True).body.decode())
            self.assertEqual(self.stop(second), 0, "the second server did not stop cleanly")
            # (requests() has every request answered, the second server's last one too.)
            mark_kept = len(s3.requests())
        else:
            mark_other = mark_kept = len(s3.requests())
            self.assertEqual(metrics(base, token).get("larder_fleet_cache_published_total"), 0)

        # The failed test's store, kept: its artifact goes to the artifacts bucket when the server has keys.
        status, _, _ = call(base, "PATCH", "/stores/" + store["id"], {"keep": True}, token=token)
        self.assertEqual(status, 200)
        if artifacts:
            artifacts_bucket, artifacts_prefix = bucket_url(artifacts)
            name = re.escape(artifacts_prefix) + "/(" + run + ")/4242_tests_test_one-" + re.escape(store["id"]) + r"\.zip"
            if signed:
                uploaded = wait_until(lambda: metrics(base, token).get("larder_artifact_uploads_total") == 1, 30)
                self.assertTrue(uploaded, "no upload of the kept store's artifact: %s\n%s" % (metrics(base, token), self.fleet_log_text()[-3000:]))
            counted = metrics(base, token)
            self.assertEqual((counted.get("larder_artifact_uploads_total"), counted.get("larder_artifact_upload_errors_total")),
                             (1 if signed else 0, 0), counted)
        shown.append(call(base, "GET", "/metrics", token=token, raw=True).body.decode())
        # On SIGTERM a server waits for the publishes under way: after it, nothing more comes.
        self.assertEqual(self.stop(first), 0, "the server did not stop cleanly")

        # What the servers asked of the bucket: by name, never a listing; signed (a refused
        # signature is 403), or, without keys, unsigned (moto refuses them all with 500).
        made = s3.requests()[mark:]
        answered = (200, 404) if signed else (500,)
        for method, path, status in made:
            self.assertIn(method, ("GET", "PUT"), (method, path, status))
            self.assertNotIn("?", path, "a listing: %s %s" % (method, path))
            self.assertIn(status, answered, "%s %s answered %d: %s" % (method, path, status, made))
        puts = [(path, status) for method, path, status in made if method == "PUT"]
        published = [re.fullmatch(manifest, path).group(1) for path, status in puts if re.fullmatch(manifest, path)]
        if publishes:
            self.assertEqual(len(published), built, puts)
            self.assertEqual([r for r in made[mark_other - mark:mark_kept - mark] if r[0] != "GET"], [],
                             "the second server wrote to the bucket")
        else:
            self.assertEqual(published, [], "published though it should not")
        self.assertEqual(len(puts), len(published) * 2 + (1 if artifacts and signed else 0), puts)

        # The buckets: a manifest per entry built, each naming an object that is there; the artifact.
        in_cache = s3.list(cache_bucket, cache_prefix + "/")
        manifests = sorted(name for name in in_cache if re.fullmatch(manifest, "/%s/%s" % (cache_bucket, name)))
        self.assertEqual(manifests, sorted("%s/manifests/%s.json" % (cache_prefix, key) for key in published))
        objects = [cache_prefix + "/" + json.loads(s3.get(cache_bucket, name))["object"] for name in manifests]
        self.assertEqual(sorted(in_cache), sorted(manifests + objects))
        if artifacts:
            uploads = s3.list(artifacts_bucket, artifacts_prefix + "/")
            if signed:
                self.assertEqual(len(uploads), 1, uploads)
                self.assertRegex(uploads[0], "^%s$" % name)
                self.assertIn(("/%s/%s" % (artifacts_bucket, uploads[0]), 200), puts)
                self.assertTrue(s3.get(artifacts_bucket, uploads[0]).startswith(b"PK\x03\x04"), "the artifact is not a zip")
            else:
                self.assertEqual(uploads, [])

        # No secret in what the servers show or log.
        shown = "\n".join(shown + [readable_log(self.fleet_log_text())])
        self.assertNotIn(s3.secret_access_key, shown)

    def run_shell(self, script, env, cwd=None, timeout=60, shell="bash"):
        return subprocess.run([shell, "-euc" if shell == "bash" else "-ec", script], env=env, cwd=cwd,
                              capture_output=True, text=True, timeout=timeout)

    def health_answers(self, command, env, expected):
        """Runs a health command as the container would (exec form or shell)."""
        if isinstance(command, str):
            done = self.run_shell(command, env, shell="sh")
        else:
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, expected, done.stdout + done.stderr)

    def assert_junit(self, path):
        self.assertTrue(os.path.exists(path), path)
        suites = ElementTree.parse(path).getroot()
        cases = suites.findall(".//testcase")
        self.assertGreater(len(cases), 0)
        self.assertEqual([c.get("name") for c in cases if c.find("failure") is not None or c.find("error") is not None], [])

    def same_path_mount(self, mounts, path):
        """The (host, container) mount holding `path` in the container, which must be at the same path on the host."""
        holding = [(h, c) for h, c in mounts if path == c or path.startswith(c.rstrip("/") + "/")]
        self.assertTrue(holding, "%s is on no shared mount: %s" % (path, mounts))
        host, container = max(holding, key=lambda m: len(m[1]))
        self.assertEqual(host, container, "a store's path must be the same on both sides")
        return host


class GitHubActionsTests(Scratch):
    BUCKETS_OF = "github-actions.yml"

    def setUp(self):
        super().setUp()
        (self.workflow,) = load("github-actions.yml")
        self.jobs = self.workflow["jobs"]
        self.service = self.jobs["tests"]["services"]["larder"]
        self.job_env = self.jobs["tests"]["env"]

    WORKSPACE = "/home/runner/work/project/project"

    @classmethod
    def expressions(cls, value, fork=False):
        """${{ ... }} as GitHub fills them for this run: a push, or a pull
        request from a fork (which gets no secrets and no variables)."""
        event = {"pull_request": {"head": {"repo": {"fork": True}}}} if fork else {}
        contexts = {"github": {"run_id": "4242", "run_attempt": "1", "workspace": cls.WORKSPACE,
                               "event_name": "pull_request" if fork else "push", "event": event},
                    # The repository's secrets: the keys of the class's S3 server.
                    "secrets": {} if fork else {"LARDER_CACHE_ACCESS_KEY_ID": cls.s3.access_key_id,
                                                "LARDER_CACHE_SECRET_ACCESS_KEY": cls.s3.secret_access_key},
                    "vars": {}}
        return GitHubExpression.fill(value, contexts)

    def service_env(self, fork=False):
        return {k: self.expressions(v, fork) for k, v in self.service["env"].items()}

    def test_the_workflow_names_one_image_for_both_jobs(self):
        self.assertEqual(self.workflow["on"] if "on" in self.workflow else self.workflow[True], ["push", "pull_request"])
        self.assertEqual(self.service["image"], self.jobs["migration-checks"]["container"])

    def test_the_health_command_answers_as_the_service_is_set_up(self):
        options = shlex.split(self.service["options"])
        command = options[options.index("--health-cmd") + 1]
        self.assertEqual(command, "larder health")
        self.workspace()
        env = self.container_env(self.service_env())
        server, _ = self.serve(env)
        self.health_answers(command, env, 0)
        self.stop(server)
        self.health_answers(command, env, 1)

    def test_the_runner_opens_the_stores_at_the_path_larder_gives(self):
        env = self.service_env()
        mounts = [tuple(self.expressions(v).split(":")[:2]) for v in self.service["volumes"]]
        shared = self.same_path_mount(mounts, env["LARDER_ROOT"])
        host_port, container_port = self.service["ports"][0].rsplit(":", 2)[-2:]
        self.assertEqual(container_port, image_environment()["LARDER_PORT"])
        self.assertEqual(url_port(self.job_env["LARDER_URL"]), int(host_port))
        self.assertEqual(self.expressions(self.job_env["LARDER_TOKEN"]), env["LARDER_TOKEN"])
        # The fixtures: from the workspace, mounted where LARDER_FIXTURES looks.
        workspace = [c for h, c in mounts if h == self.WORKSPACE]
        self.assertTrue(env["LARDER_FIXTURES"].startswith(workspace[0] + "/"))

        settings = self.container_env(env)
        _, base = self.serve(settings)
        self.workspace(workspace[0])  # the checkout lands after the service started
        status, store, _ = call(base, "POST", "/stores", {"template": "gallery"}, token=env["LARDER_TOKEN"])
        self.assertEqual(status, 201)
        self.assertTrue(store["path"].startswith(self.place(shared) + "/"), store["path"])
        self.assertTrue(os.path.exists(store["path"]))
        self.assertEqual(os.stat(store["path"]).st_mode & 0o777, int(env["LARDER_STORE_MODE"], 8))

    def test_the_migration_checks_job_runs_and_reports_junit(self):
        job = self.jobs["migration-checks"]
        workspace = self.workspace()
        runs = [step["run"] for step in job["steps"] if "run" in step]
        self.assertTrue(runs)
        for run in runs:
            done = self.run_shell(run, dict(self.base_env, **image_environment()), cwd=workspace)
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        junit = re.search(r"--junit (\S+)", " ".join(runs)).group(1)
        self.assert_junit(os.path.join(workspace, junit))
        uploads = [s["with"]["path"] for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
        self.assertEqual(uploads, [junit])

    def test_failed_tests_databases_are_uploaded(self):
        steps = self.jobs["tests"]["steps"]
        upload = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact") and s.get("if") == "failure()"]
        self.assertEqual(len(upload), 1)
        self.assertEqual(upload[0]["with"]["path"].rstrip("/"), self.job_env["LARDER_ARTIFACTS"])

    def test_the_image_is_named_in_the_workflow_since_a_forks_pull_request_gets_no_variables(self):
        for image in (self.service["image"], self.jobs["migration-checks"]["container"]):
            self.assertEqual(self.expressions(image, fork=True), image)
            self.assertTrue(image)

    def test_a_push_publishes_to_the_fleet_cache_and_another_runner_reads_it(self):
        env = self.service_env()
        self.assertEqual((env["LARDER_CACHE_READ_ONLY"], env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]),
                         ("false", self.s3.access_key_id, self.s3.secret_access_key))
        self.workspace()
        self.assert_fleet(self.container_env(env), env["LARDER_TOKEN"], True, re.escape("4242-1"))

    def test_a_forks_pull_request_reads_without_a_key_never_publishes_and_no_test_fails(self):
        env = self.service_env(fork=True)
        self.assertEqual((env["LARDER_CACHE_READ_ONLY"], env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]), ("true", "", ""))
        self.workspace()
        self.assert_fleet(self.container_env(env), env["LARDER_TOKEN"], False, re.escape("4242-1"))

    def test_the_keys_are_the_service_containers_alone(self):
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            self.assertIn("secrets.", self.service["env"][name])
        self.assertNotIn("secrets.", json.dumps(self.job_env) + json.dumps(self.jobs["tests"]["steps"]))


class GitLabCITests(Scratch):
    BUCKETS_OF = "gitlab-ci.yml"

    def setUp(self):
        super().setUp()
        (self.pipeline,) = load("gitlab-ci.yml")
        self.tests = self.pipeline["tests"]
        self.project_path = "/builds/group/project"
        self.project = self.place(self.project_path)

    def predefined(self):
        return {"CI_PROJECT_DIR": self.project, "CI_PIPELINE_ID": "77", "CI_JOB_ID": "4242"}

    def variables(self, project=None):
        """The tests job's variables as the runner hands them to the job and
        its services: the file's, the first matching workflow rule's over
        them, the job's over both. $NAME is expanded from the predefined
        variables, the project's CI/CD variables (`project`: services get
        none of them but through these) and the file's; a name none has is
        empty."""
        known = dict(self.predefined(), **(project or {}))

        def expand(value, more):
            return re.sub(r"\$\{?(\w+)\}?", lambda m: more.get(m.group(1), known.get(m.group(1), "")), str(value))

        merged = {k: expand(v, {}) for k, v in self.pipeline.get("variables", {}).items()}
        for rule in self.pipeline.get("workflow", {}).get("rules", []):
            if "if" in rule:
                name = re.fullmatch(r"\$(\w+)", rule["if"].strip())
                self.assertTrue(name, "this test reads rules of the form `if: $NAME` only: %r" % rule["if"])
                if not dict(known, **merged).get(name.group(1)):
                    continue
            else:
                self.assertEqual(rule.get("when"), "always", rule)
            merged.update({k: expand(v, merged) for k, v in rule.get("variables", {}).items()})
            break
        merged.update({k: expand(v, merged) for k, v in self.tests["variables"].items()})
        return merged

    def test_the_migration_checks_job_runs_and_reports_junit(self):
        job = self.pipeline["migration-checks"]
        self.assertEqual(job["image"]["name"], self.tests["services"][0]["name"])
        workspace = self.workspace(self.project_path)
        for line in job["script"]:
            done = self.run_shell(line, dict(self.base_env, **image_environment()), cwd=workspace)
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        junit = job["artifacts"]["reports"]["junit"]
        self.assertIn("--junit " + junit, " ".join(job["script"]))
        self.assert_junit(os.path.join(workspace, junit))

    def test_the_service_starts_on_the_jobs_variables_and_the_wait_finds_it(self):
        if not shutil.which("curl"):
            self.skipTest("no curl") if os.environ.get("CI") != "true" else self.fail("curl is missing")
        variables = self.variables()
        url = urllib.parse.urlsplit(variables["LARDER_URL"])
        self.assertEqual(url.hostname, self.tests["services"][0]["alias"])
        env = self.container_env(variables)
        _, base = self.serve(env)
        # Services start before the clone: the fixtures arrive afterwards.
        self.workspace(self.project_path)
        wait = self.tests["before_script"][0]
        self.assertIn("deadline", wait)
        job_env = {**self.base_env, **variables, "LARDER_URL": base}
        began = time.monotonic()
        done = self.run_shell(wait, job_env, shell="sh")
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertLess(time.monotonic() - began, 5)
        # The store's path is in the project directory, which the job sees.
        status, store, _ = call(base, "POST", "/stores", {"template": "boardgames"}, token=variables["LARDER_TOKEN"])
        self.assertEqual(status, 201)
        self.assertTrue(store["path"].startswith(self.project + "/"))

    def test_the_wait_gives_up_at_its_deadline(self):
        if not shutil.which("curl"):
            self.skipTest("no curl") if os.environ.get("CI") != "true" else self.fail("curl is missing")
        wait = re.sub(r"\+ \d+ \)\)", "+ 2 ))", self.tests["before_script"][0])
        began = time.monotonic()
        done = self.run_shell(wait, dict(self.base_env, LARDER_URL="http://127.0.0.1:%d" % free_port()), shell="sh")
        self.assertEqual(done.returncode, 1)
        self.assertIn("did not answer", done.stderr)
        self.assertLess(time.monotonic() - began, 10)

    def project_keys(self):
        """The project's protected CI/CD variables the header asks for, with values (the keys of the class's S3 server)."""
        with open(os.path.join(DEPLOY, "gitlab-ci.yml")) as f:
            header = f.read().split("\nvariables:")[0]
        self.assertIn("protected", header)
        names = ["LARDER_CACHE_ACCESS_KEY_ID", "LARDER_CACHE_SECRET_ACCESS_KEY"]
        for name in names:
            self.assertIn(name, header)
        return dict(zip(names, [self.s3.access_key_id, self.s3.secret_access_key]))

    def test_a_pipeline_with_the_protected_keys_publishes_and_another_reads_it(self):
        variables = self.variables(self.project_keys())
        self.assertEqual((variables["LARDER_CACHE_READ_ONLY"], variables["AWS_ACCESS_KEY_ID"], variables["AWS_SECRET_ACCESS_KEY"]),
                         ("false", self.s3.access_key_id, self.s3.secret_access_key))
        self.workspace(self.project_path)
        # The service gets the file's variables and the predefined ones (CI_PIPELINE_ID names the artifacts' run).
        settings = self.container_env(dict(self.predefined(), **variables))
        self.assert_fleet(settings, variables["LARDER_TOKEN"], True, "77")

    def test_a_pipeline_without_them_reads_without_a_key_never_publishes_and_no_test_fails(self):
        variables = self.variables({})
        self.assertEqual((variables["LARDER_CACHE_READ_ONLY"], variables["AWS_ACCESS_KEY_ID"], variables["AWS_SECRET_ACCESS_KEY"]),
                         ("true", "", ""))
        self.workspace(self.project_path)
        settings = self.container_env(dict(self.predefined(), **variables))
        self.assert_fleet(settings, variables["LARDER_TOKEN"], False, "77")

    def test_git_clean_spares_the_root_and_artifacts_are_kept(self):
        variables = self.variables()
        root = os.path.relpath(variables["LARDER_ROOT"], self.project)
        top = root.split("/")[0]
        self.assertIn("--exclude=%s/" % top, variables["GIT_CLEAN_FLAGS"])
        self.assertIn(variables["LARDER_ARTIFACTS"] + "/", self.tests["artifacts"]["paths"])
        self.assertEqual(self.tests["artifacts"]["when"], "always")
        self.assertIn("junit", self.tests["artifacts"]["reports"])


class ComposeTests(Scratch):
    def setUp(self):
        super().setUp()
        (self.compose,) = load("compose.yaml")
        self.larder = self.compose["services"]["larder"]
        self.tests = self.compose["services"]["tests"]

    @staticmethod
    def interpolate(value):
        """${NAME:-default} with nothing set, as compose fills it."""
        return re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", str(value))

    def environment(self, service):
        return {k: self.interpolate(v) for k, v in service["environment"].items()}

    def test_the_image_builds_from_the_dockerfile(self):
        build = self.larder["build"]
        self.assertTrue(os.path.exists(os.path.join(DEPLOY, build["context"], build["dockerfile"])))

    def test_the_healthcheck_answers_and_the_tests_wait_for_it(self):
        self.assertEqual(self.tests["depends_on"]["larder"]["condition"], "service_healthy")
        check = self.larder["healthcheck"]["test"]
        self.assertEqual(check[0], "CMD")
        self.workspace("/srv/larder")
        env = self.container_env(self.environment(self.larder))
        server, _ = self.serve(env)
        self.health_answers(check[1:], env, 0)
        self.stop(server)
        self.health_answers(check[1:], env, 1)

    def test_the_tests_share_the_root_volume_at_the_same_path_in_the_stores_group(self):
        volumes = set(self.compose["volumes"])
        root = self.environment(self.larder)["LARDER_ROOT"]

        def named(service):
            return {v.split(":")[0]: v.split(":")[1] for v in service["volumes"] if v.split(":")[0] in volumes}

        larder, tests = named(self.larder), named(self.tests)
        shared = [name for name, target in larder.items() if root.startswith(target.rstrip("/") + "/")]
        self.assertEqual(len(shared), 1)
        self.assertEqual(tests.get(shared[0]), larder[shared[0]])
        self.assertIn(str(image_group()), [str(g) for g in self.tests["group_add"]])
        url = urllib.parse.urlsplit(self.environment(self.tests)["LARDER_URL"])
        self.assertEqual((url.hostname, str(url.port)), ("larder", image_environment()["LARDER_PORT"]))
        self.assertEqual(self.environment(self.tests)["LARDER_TOKEN"], self.environment(self.larder)["LARDER_TOKEN"])


class KubernetesTests(Scratch):
    BUCKETS_OF = "kubernetes/shared.yaml"

    def setUp(self):
        super().setUp()
        (self.pod,) = load("kubernetes/ci-pod.yaml")
        self.shared = load("kubernetes/shared.yaml")
        spec = self.pod["spec"]
        self.sidecar = next(c for c in spec["initContainers"] if c["name"] == "larder")
        self.tests = next(c for c in spec["containers"] if c["name"] == "tests")

    @staticmethod
    def env_of(container):
        return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}

    def probes_answer(self, container, env):
        probes = [container[p]["exec"]["command"] for p in ["startupProbe", "readinessProbe", "livenessProbe"]]
        self.assertTrue(all(p[:2] == ["larder", "health"] for p in probes), probes)
        server, _ = self.serve(env)
        for probe in probes:
            self.health_answers(probe, env, 0)
        self.stop(server)
        for probe in probes:
            self.health_answers(probe, env, 1)

    def test_the_sidecar_is_native_probed_and_bounded(self):
        self.assertEqual(self.sidecar["restartPolicy"], "Always")
        for container in self.pod["spec"]["initContainers"] + self.pod["spec"]["containers"]:
            self.assertIn("requests", container.get("resources", {}), container["name"])
        self.assertIn("memory", self.sidecar["resources"]["limits"])
        self.assertEqual(self.sidecar["securityContext"]["runAsGroup"], image_group())

    def test_the_sidecar_starts_without_a_token_on_loopback_and_its_probes_answer(self):
        settings = self.env_of(self.sidecar)
        self.assertEqual(settings["LARDER_HOST"], "127.0.0.1")
        self.assertNotIn("LARDER_TOKEN", settings)
        self.workspace("/srv/larder")
        self.probes_answer(self.sidecar, self.container_env(settings))

    def test_the_tests_share_an_in_memory_root_at_the_same_path_in_the_stores_group(self):
        spec = self.pod["spec"]
        memory = [v["name"] for v in spec["volumes"] if v.get("emptyDir", {}).get("medium") == "Memory"]
        self.assertEqual(len(memory), 1)

        def mount(container):
            return next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == memory[0])

        self.assertEqual(mount(self.sidecar), mount(self.tests))
        root = self.env_of(self.sidecar).get("LARDER_ROOT", image_environment()["LARDER_ROOT"])
        self.assertTrue(root.startswith(mount(self.sidecar) + "/"))
        self.assertIn(image_group(), spec["securityContext"]["supplementalGroups"])
        self.assertEqual(spec["securityContext"]["fsGroup"], image_group())
        fixtures = self.env_of(self.sidecar)["LARDER_FIXTURES"]
        self.assertIn(fixtures, [m["mountPath"] for m in self.sidecar["volumeMounts"]])
        sidecar = self.env_of(self.sidecar)
        port = sidecar.get("LARDER_PORT", image_environment()["LARDER_PORT"])
        self.assertEqual(self.env_of(self.tests)["LARDER_URL"], "http://%s:%s" % (sidecar["LARDER_HOST"], port))

    def test_the_shared_server_has_a_token_a_service_and_probes_that_answer(self):
        kinds = {d["kind"]: d for d in self.shared}
        self.assertEqual(sorted(kinds), ["Deployment", "Service"])
        deployment, service = kinds["Deployment"], kinds["Service"]
        template = deployment["spec"]["template"]
        labels = template["metadata"]["labels"]
        self.assertTrue(set(service["spec"]["selector"].items()) <= set(labels.items()))
        self.assertEqual(deployment["spec"]["selector"]["matchLabels"], service["spec"]["selector"])
        (container,) = template["spec"]["containers"]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        (exposed,) = service["spec"]["ports"]
        self.assertEqual(ports[exposed["targetPort"]], int(image_environment()["LARDER_PORT"]))
        token = next(e for e in container["env"] if e["name"] == "LARDER_TOKEN")
        self.assertIn("secretKeyRef", token["valueFrom"])
        # The image's 0.0.0.0 with a token; the probes need none (GET /health).
        self.workspace("/srv/larder")
        self.probes_answer(container, self.container_env({"LARDER_TOKEN": "from-the-secret"}))

    def test_the_shared_server_uses_the_fleet_cache_with_the_keys_of_its_secret(self):
        deployment = next(d for d in self.shared if d["kind"] == "Deployment")
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        (source,) = container["envFrom"]
        secret = source["secretRef"]["name"]
        with open(os.path.join(DEPLOY, "kubernetes", "shared.yaml")) as f:
            made = re.search(r"kubectl create secret generic %s((?: --from-literal=\w+=\S*)+)" % re.escape(secret), f.read())
        self.assertTrue(made, "the comment says how to make the Secret %s" % secret)
        self.assertEqual(sorted(re.findall(r"--from-literal=(\w+)=", made.group(1))), ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"])
        env = dict(self.env_of(container), LARDER_TOKEN="from-the-secret",
                   AWS_ACCESS_KEY_ID=self.s3.access_key_id, AWS_SECRET_ACCESS_KEY=self.s3.secret_access_key)
        self.workspace("/srv/larder")
        # One server for many runs: RUN is its start time (the test helpers' labels name each run).
        self.assert_fleet(self.container_env(env), "from-the-secret", True, r"\d{8}T\d{6}Z")


class SettingsTests(unittest.TestCase):
    """Every LARDER_ and AWS_ variable the recipes set is read by someone:
    the server (`larder serve --help` lists it as a setting, or names it, as
    the AWS tools' variables), or a client; docs/fleet.md names the fleet's."""

    @classmethod
    def setUpClass(cls):
        cls.help = serve_help()
        cls.settings = server_variables(cls.help)

    @staticmethod
    def named():
        """(recipe, variable) of every LARDER_ and AWS_ variable the recipes set."""
        found = []

        def add(where, names):
            found.extend((where, name) for name in names if name.startswith(("LARDER_", "AWS_")))

        (workflow,) = load("github-actions.yml")
        for job in workflow["jobs"].values():
            add("github-actions.yml", job.get("env", {}))
            for service in job.get("services", {}).values():
                add("github-actions.yml", service.get("env", {}))
        (pipeline,) = load("gitlab-ci.yml")
        add("gitlab-ci.yml", pipeline.get("variables", {}))
        for rule in pipeline.get("workflow", {}).get("rules", []):
            add("gitlab-ci.yml", rule.get("variables", {}))
        for job in pipeline.values():
            if isinstance(job, dict) and "script" in job:
                add("gitlab-ci.yml", job.get("variables", {}))
        (compose,) = load("compose.yaml")
        for service in compose["services"].values():
            environment = service.get("environment", {})
            add("compose.yaml", environment if isinstance(environment, dict) else [e.split("=")[0] for e in environment])
        for name in ("kubernetes/ci-pod.yaml", "kubernetes/shared.yaml"):
            for document in load(name):
                spec = document.get("spec", {})
                spec = spec.get("template", {}).get("spec", spec)
                for container in spec.get("initContainers", []) + spec.get("containers", []):
                    add(name, [e["name"] for e in container.get("env", [])])
            with open(os.path.join(DEPLOY, name)) as f:
                add(name, re.findall(r"--from-literal=(\w+)=", f.read()))
        add("Dockerfile", image_environment())
        with open(os.path.join(DEPLOY, "debian", "default")) as f:
            add("debian/default", re.findall(r"^#?(\w+)=", f.read(), re.M))
        with open(os.path.join(DEPLOY, "larder.service")) as f:
            add("larder.service", re.findall(r"^Environment=(\w+)=", f.read(), re.M))
        return found

    def test_every_variable_a_recipe_sets_is_read_by_the_server_or_a_client(self):
        named = self.named()
        self.assertIn(("github-actions.yml", "LARDER_CACHE_URL"), named)
        aws = set(re.findall(r"\bAWS_[A-Z0-9_]*[A-Z0-9]", self.help))
        unknown = sorted({(where, name) for where, name in named
                          if name not in self.settings | CLIENT_VARIABLES | RECIPE_VARIABLES | aws})
        self.assertEqual(unknown, [], "neither settings nor variables `%s serve --help` names, nor a client's" % BINARY)

    def test_docs_fleet_names_every_fleet_setting_the_recipes_use(self):
        with open(os.path.join(REPO, "docs", "fleet.md")) as f:
            page = f.read()
        fleet = sorted({name for _, name in self.named() if FLEET_VARIABLE.fullmatch(name)})
        self.assertIn("LARDER_CACHE_READ_ONLY", fleet)
        self.assertEqual([name for name in fleet if "`%s`" % name not in page], [])


class WaitLoopTests(Scratch):
    """The CI notes' wait loop (deploy/README.md) with a deadline."""

    def setUp(self):
        super().setUp()
        with open(os.path.join(DEPLOY, "README.md")) as f:
            blocks = re.findall(r"```bash\n(.*?)```", f.read(), re.S)
        self.assertEqual(len(blocks), 1)
        self.loop = blocks[0] + 'echo "URL=$LARDER_URL"\necho "PID=$larder_pid"\n'
        self.work = os.path.join(self.scratch, "job")
        os.mkdir(self.work)
        shutil.copytree(os.path.join(REPO, "fixtures"), os.path.join(self.work, "fixtures"))

    def run_loop(self, **env):
        began = time.monotonic()
        done = self.run_shell(self.loop, {**self.base_env, "RUNNER_TEMP": self.scratch, **env}, cwd=self.work)
        # The loop's server runs on in the background, as in a CI job: stop it.
        for pid in re.findall(r"^PID=(\d+)$", done.stdout, re.M):
            self.addCleanup(os.kill, int(pid), signal.SIGTERM)
        return done, time.monotonic() - began

    def test_it_exports_the_url_of_a_started_server(self):
        done, _ = self.run_loop()
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        url = re.search(r"^URL=(http://\S+)$", done.stdout, re.M).group(1)
        self.assertIn("ok: larder", done.stdout)
        self.assertEqual(call(url, "GET", "/health")[0], 200)

    def test_it_fails_at_once_when_the_server_exits(self):
        with open(os.path.join(self.scratch, "in-the-way"), "w"):
            pass
        done, took = self.run_loop(RUNNER_TEMP=os.path.join(self.scratch, "in-the-way"))
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertIn("larder did not start", done.stderr)
        self.assertLess(took, 10)

    def test_it_gives_up_at_its_deadline_when_the_server_never_listens(self):
        silent = os.path.join(self.scratch, "silent")
        os.mkdir(silent)
        with open(os.path.join(silent, "larder"), "w") as f:
            f.write("#!/bin/sh\nexec sleep 5\n")
        os.chmod(os.path.join(silent, "larder"), 0o755)
        done, took = self.run_loop(PATH=silent + ":/usr/bin:/bin", LARDER_START_TIMEOUT="1")
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertIn("larder did not start", done.stderr)
        self.assertLess(took, 10)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
