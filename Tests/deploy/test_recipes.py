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
  its paths moved under a scratch folder and its port to a free one.

    python3 Tests/deploy/test_recipes.py BINARY
"""
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
from calls import call  # noqa: E402
from processes import REPO, free_port, larder_binary, listening, scratch_folder, stop  # noqa: E402

try:
    import yaml
except ImportError:
    raise SystemExit("test_recipes: PyYAML is missing (scripts/setup installs python3-yaml)")

DEPLOY = os.path.join(REPO, "deploy")
BINARY = larder_binary()


def load(name):
    with open(os.path.join(DEPLOY, name)) as f:
        return list(yaml.safe_load_all(f))


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
    def setUp(self):
        super().setUp()
        (self.workflow,) = load("github-actions.yml")
        self.jobs = self.workflow["jobs"]
        self.service = self.jobs["tests"]["services"]["larder"]
        self.job_env = self.jobs["tests"]["env"]

    @staticmethod
    def expressions(value):
        """${{ ... }} as GitHub fills them, with this run's numbers."""
        filled = {"github.run_id": "4242", "github.run_attempt": "1", "vars.LARDER_IMAGE": "larder:test"}
        return re.sub(r"\$\{\{\s*([\w.]+)\s*\}\}", lambda m: filled.get(m.group(1), m.group(0)), str(value))

    def service_env(self):
        return {k: self.expressions(v) for k, v in self.service["env"].items()}

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
        workspace = [c for h, c in mounts if h == "${{ github.workspace }}"]
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


class GitLabCITests(Scratch):
    def setUp(self):
        super().setUp()
        (self.pipeline,) = load("gitlab-ci.yml")
        self.tests = self.pipeline["tests"]
        self.project_path = "/builds/group/project"
        self.project = self.place(self.project_path)

    def variables(self):
        """The tests job's variables as the runner expands them."""
        predefined = {"CI_PROJECT_DIR": self.project, "CI_PIPELINE_ID": "77", "CI_JOB_ID": "4242"}
        return {k: re.sub(r"\$(\w+)", lambda m: predefined.get(m.group(1), m.group(0)), str(v))
                for k, v in self.tests["variables"].items()}

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
