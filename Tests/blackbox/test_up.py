#!/usr/bin/env python3
"""`larder up`: the server the clients' test helpers start when no URL is
given, shared by the processes of one run and gone after the last.

    python3 Tests/blackbox/test_up.py .build/debug/larder

Each test runs `larder up` with a TMPDIR of its own, for "test processes"
that are `sleep`s it starts and ends, and looks at the processes and the
folder the server leaves (or does not).
"""
import fcntl
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from calls import call, metric  # noqa: E402
from processes import REPO, SYSTEM_PYTHON, clean_environment, larder_binary, wait_until  # noqa: E402

BINARY = larder_binary()


def running(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def waits_for_lock(pid):
    """Whether process `pid` is blocked waiting for a flock (/proc/locks' "->" lines)."""
    with open("/proc/locks") as f:
        return any(line.split()[1] == "->" and line.split()[5] == str(pid) for line in f if len(line.split()) > 5)


class UpTests(unittest.TestCase):
    def setUp(self):
        self.scratch = tempfile.mkdtemp(prefix="larder-up-test-")
        self.tmp = os.path.join(self.scratch, "tmp")
        os.mkdir(self.tmp)
        self.project = os.path.join(self.scratch, "project")
        os.makedirs(os.path.join(self.project, "tests"))
        shutil.copytree(os.path.join(REPO, "fixtures", "gallery"), os.path.join(self.project, "tests", "fixtures", "gallery"))
        with open(os.path.join(self.project, "pyproject.toml"), "w") as f:
            f.write("[project]\nname = 'sample'\n")
        self.users = []

    def tearDown(self):
        for user in self.users:
            if user.poll() is None:
                user.kill()
                user.wait()
        # Whatever server a test left: stopped, so nothing outlives the test.
        for state in self.states():
            try:
                os.kill(state["pid"], signal.SIGKILL)
            except OSError:
                pass
        shutil.rmtree(self.scratch, ignore_errors=True)

    def user(self):
        """A stand-in for a test process: runs until ended."""
        process = subprocess.Popen(["sleep", "600"])
        self.users.append(process)
        return process

    def end(self, process):
        process.terminate()
        process.wait()

    def up(self, *arguments, cwd=None, env=None, check=True):
        # The template cache that outlives runs: in the test's own scratch, never the user's ~/.cache.
        base = {"TMPDIR": self.tmp, "XDG_CACHE_HOME": os.path.join(self.scratch, "xdg")}
        done = subprocess.run([BINARY, "up", *arguments], cwd=cwd or self.project, env=clean_environment(**{**base, **(env or {})}),
                              capture_output=True, text=True, timeout=90)
        if check:
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(done.stderr, "")
        return done

    def folders(self):
        parent = os.path.join(self.tmp, "larder-%d" % os.getuid())
        return sorted(os.listdir(parent)) if os.path.isdir(parent) else []

    def states(self):
        found = []
        for folder in self.folders():
            path = os.path.join(self.tmp, "larder-%d" % os.getuid(), folder, "server.json")
            if os.path.exists(path):
                with open(path) as f:
                    found.append(json.load(f))
        return found

    def test_one_server_for_the_processes_of_a_run_and_none_after_the_last(self):
        first, second = self.user(), self.user()
        began = time.monotonic()
        url = self.up("--for", str(first.pid)).stdout.strip()
        print("\n    larder up, starting the server: %.0f ms" % ((time.monotonic() - began) * 1000), file=sys.stderr)
        self.assertRegex(url, r"^http://127\.0\.0\.1:\d+$")
        # The second process, from a folder deeper in the project: the same server.
        deeper = os.path.join(self.project, "tests")
        began = time.monotonic()
        self.assertEqual(self.up("--for", str(second.pid), cwd=deeper).stdout.strip(), url)
        print("    larder up, joining it: %.0f ms" % ((time.monotonic() - began) * 1000), file=sys.stderr)
        [state] = self.states()
        # The conventional fixtures folder, tests/fixtures, is what it serves.
        self.assertEqual([t["name"] for t in call(url, "GET", "/templates").body["templates"]], ["gallery"])
        status, store, _ = call(url, "POST", "/stores", {"template": "gallery", "fixtures": ["artists"]})
        self.assertEqual(status, 201)
        self.assertTrue(store["path"].startswith(os.path.realpath(self.tmp)) or store["path"].startswith(self.tmp))
        # Private to this user: the folders and the server's state.
        parent = os.path.join(self.tmp, "larder-%d" % os.getuid())
        self.assertEqual(stat.S_IMODE(os.stat(parent).st_mode), 0o700)

        self.end(first)
        self.assertFalse(wait_until(lambda: not running(state["pid"]), 1.5), "the server stopped while a process it serves runs")
        self.assertEqual(call(url, "GET", "/health").body["status"], "ok")
        self.end(second)
        self.assertTrue(wait_until(lambda: not running(state["pid"])), "the server outlived the last process it serves")
        self.assertTrue(wait_until(lambda: self.folders() == []), self.folders())

    def run_once(self):
        """One run: a server started, a store made of gallery, the run ended; its builds."""
        user = self.user()
        url = self.up("--for", str(user.pid)).stdout.strip()
        status, _, _ = call(url, "POST", "/stores", {"template": "gallery", "fixtures": ["artists"]})
        self.assertEqual(status, 201)
        built = metric(url, "larder_template_builds_total")
        [state] = self.states()
        self.end(user)
        self.assertTrue(wait_until(lambda: not running(state["pid"])), "the server outlived its run")
        self.assertTrue(wait_until(lambda: self.folders() == []), self.folders())
        return built

    def test_the_next_run_on_the_machine_builds_nothing(self):
        """The template cache outlives the run, in ${XDG_CACHE_HOME}/larder/cache; the stores do not."""
        self.assertEqual(self.run_once(), 1)
        self.assertEqual(self.run_once(), 0)
        cache = os.path.join(self.scratch, "xdg", "larder", "cache")
        self.assertEqual(len([f for f in os.listdir(cache) if f.endswith(".sqlite")]), 1)
        # A cache folder others may write is not this user's alone: not used (another user's template would land in these stores).
        os.chmod(os.path.join(self.scratch, "xdg", "larder"), 0o777)
        self.assertEqual(self.run_once(), 1)

    def test_many_processes_starting_at_once_share_one_server(self):
        users = [self.user() for _ in range(8)]
        urls = [None] * len(users)

        def join(i):
            urls[i] = self.up("--for", str(users[i].pid)).stdout.strip()
        threads = [threading.Thread(target=join, args=(i,)) for i in range(len(users))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(len(set(urls)), 1, urls)
        self.assertEqual(len(self.states()), 1)
        self.assertEqual(len(os.listdir(os.path.join(self.tmp, "larder-%d" % os.getuid(), self.folders()[0], "users"))), 8)
        pid = self.states()[0]["pid"]
        for user in users:
            self.end(user)
        self.assertTrue(wait_until(lambda: not running(pid)))
        self.assertTrue(wait_until(lambda: self.folders() == []))

    def test_a_process_that_follows_within_a_second_keeps_the_server(self):
        first = self.user()
        url = self.up("--for", str(first.pid)).stdout.strip()
        self.end(first)
        second = self.user()
        self.assertEqual(self.up("--for", str(second.pid)).stdout.strip(), url)
        self.end(second)

    def test_joining_a_server_as_it_stops_starts_a_new_one(self):
        # Back-to-back runs: the next run's `larder up` and the last run's server,
        # removing the folder, both wait on the run's lock; whichever wins, `up` answers a server that works.
        for _ in range(6):
            first = self.user()
            self.up("--for", str(first.pid))
            [state] = self.states()
            lock = os.path.join(self.tmp, "larder-%d" % os.getuid(), self.folders()[0], "lock")
            holder = os.open(lock, os.O_RDWR)
            fcntl.flock(holder, fcntl.LOCK_EX)
            try:
                self.end(first)
                self.assertTrue(wait_until(lambda: waits_for_lock(state["pid"]), 10), "the server did not go for the lock")
                second = self.user()
                joining = subprocess.Popen([BINARY, "up", "--for", str(second.pid)], cwd=self.project, env=clean_environment(TMPDIR=self.tmp),
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                self.assertTrue(wait_until(lambda: waits_for_lock(joining.pid), 10), "`larder up` did not wait for the lock")
            finally:
                os.close(holder)
            out, err = joining.communicate(timeout=90)
            self.assertEqual(joining.returncode, 0, err)
            joined = out.strip()
            self.assertEqual(call(joined, "GET", "/health").body["status"], "ok")
            self.assertEqual(call(joined, "POST", "/stores", {"template": "gallery"})[0], 201)
            self.end(second)
            self.assertTrue(wait_until(lambda: self.folders() == [], 10), self.folders())

    def test_other_fixtures_or_settings_get_their_own_server(self):
        user = self.user()
        url = self.up("--for", str(user.pid)).stdout.strip()
        other = os.path.join(self.scratch, "other-fixtures")
        shutil.copytree(os.path.join(REPO, "fixtures", "boardgames"), os.path.join(other, "boardgames"))
        named = self.up("--for", str(user.pid), "--fixtures", other).stdout.strip()
        by_variable = self.up("--for", str(user.pid), env={"LARDER_FIXTURES": other}).stdout.strip()
        pooled = self.up("--for", str(user.pid), "--pool-size", "2").stdout.strip()
        self.assertEqual(named, by_variable)
        self.assertEqual(len({url, named, pooled}), 3)
        self.assertEqual([t["name"] for t in call(named, "GET", "/templates").body["templates"]], ["boardgames"])
        pids = [s["pid"] for s in self.states()]
        self.end(user)
        self.assertTrue(wait_until(lambda: not any(running(p) for p in pids)))
        self.assertTrue(wait_until(lambda: self.folders() == []))

    def test_a_project_without_fixtures_gets_a_server_with_no_templates(self):
        bare = os.path.join(self.scratch, "bare")
        os.mkdir(bare)
        open(os.path.join(bare, "go.mod"), "w").close()  # the project's top: the search stops here
        user = self.user()
        url = self.up("--for", str(user.pid), cwd=bare).stdout.strip()
        self.assertEqual(call(url, "GET", "/templates").body["templates"], [])
        status, store, _ = call(url, "POST", "/stores", {})
        self.assertEqual(status, 201)
        self.end(user)
        self.assertTrue(wait_until(lambda: self.folders() == []))

    def ended_server(self, sig):
        """A stand-in test process and its run's server, ended by `sig`: (that process, the server's state)."""
        user = self.user()
        self.up("--for", str(user.pid))
        [state] = self.states()
        os.kill(state["pid"], sig)
        self.assertTrue(wait_until(lambda: not running(state["pid"])), "the server outlived signal %d" % sig)
        return user, state

    def test_a_killed_server_is_replaced(self):
        user, state = self.ended_server(signal.SIGKILL)
        again = self.up("--for", str(user.pid)).stdout.strip()
        [new] = self.states()
        self.assertNotEqual(new["pid"], state["pid"])
        self.assertEqual(call(again, "GET", "/health").body["status"], "ok")
        self.end(user)
        self.assertTrue(wait_until(lambda: self.folders() == []))

    def test_a_dead_servers_pid_taken_by_another_process_is_not_signalled(self):
        user, state = self.ended_server(signal.SIGKILL)
        self.assertIn("started", state)
        # As if the kernel had given the dead server's pid to an unrelated process.
        bystander = self.user()
        folder = os.path.join(self.tmp, "larder-%d" % os.getuid(), self.folders()[0])
        with open(os.path.join(folder, "server.json"), "w") as f:
            json.dump({"url": state["url"], "pid": bystander.pid, "started": state["started"]}, f)
        self.up("--for", str(user.pid))
        self.assertFalse(wait_until(lambda: bystander.poll() is not None, 0.2), "the process that has the pid now was left alone")
        [new] = self.states()
        self.assertNotIn(new["pid"], (state["pid"], bystander.pid))
        self.end(user)
        self.end(bystander)
        self.assertTrue(wait_until(lambda: self.folders() == []))

    def test_a_server_stopped_by_a_signal_cleans_up_too(self):
        self.ended_server(signal.SIGTERM)
        self.assertTrue(wait_until(lambda: self.folders() == []))

    def test_a_server_whose_folder_was_removed_stops_once_its_users_end(self):
        """A temporary-file cleaner or a test's clean-up removed the run's
        folder: no `larder up` can find the server, which stops all the same
        after the last process it served instead of waiting for a lock forever."""
        user = self.user()
        self.up("--for", str(user.pid))
        [state] = self.states()
        shutil.rmtree(os.path.join(self.tmp, "larder-%d" % os.getuid()))
        self.assertTrue(running(state["pid"]), "still serving its process")
        self.end(user)
        self.assertTrue(wait_until(lambda: not running(state["pid"]), 30), "the server outlived its folder and its users")

    def test_refusals_say_why_and_leave_nothing(self):
        user = self.user()
        cases = [
            (["--for", "999999999"], "no process 999999999 runs"),
            (["--for", str(user.pid), "--root", "/tmp/x"], "--root is chosen by `larder up`"),
            (["--for", str(user.pid), "--port", "7464"], "--port is chosen by `larder up`"),
            (["--for", str(user.pid), "--fixtures", os.path.join(self.scratch, "nope")], "does not exist or is not a folder"),
            (["--for", str(user.pid), "--prot", "1"], "unknown setting --prot; did you mean --port?"),
        ]
        for arguments, said in cases:
            done = self.up(*arguments, check=False)
            self.assertEqual(done.returncode, 64 if "--prot" in arguments else 2, arguments)
            self.assertIn(said, done.stderr)
            self.assertEqual(done.stdout, "")
        self.assertEqual(self.states(), [])

    def test_a_server_that_cannot_start_is_reported_with_its_log(self):
        user = self.user()
        done = self.up("--for", str(user.pid), "--store-group", "no-such-group-here", check=False)
        self.assertEqual(done.returncode, 2)
        self.assertIn("the server stopped as it started", done.stderr)
        self.assertIn("there is no group 'no-such-group-here'", done.stderr)
        self.assertEqual(self.folders(), [])

    def test_a_parent_folder_that_is_not_private_is_refused(self):
        user = self.user()
        parent = os.path.join(self.tmp, "larder-%d" % os.getuid())
        elsewhere = os.path.join(self.scratch, "elsewhere")
        os.mkdir(elsewhere, 0o700)
        os.symlink(elsewhere, parent)
        done = self.up("--for", str(user.pid), check=False)
        self.assertEqual(done.returncode, 2)
        self.assertIn("is not a private folder of this user", done.stderr)
        self.assertEqual(os.listdir(elsewhere), [])
        os.unlink(parent)
        os.mkdir(parent, 0o755)
        done = self.up("--for", str(user.pid), check=False)
        self.assertEqual(done.returncode, 2)
        self.assertIn("is not a private folder of this user", done.stderr)

    @unittest.skipUnless(os.getuid() == 0 and SYSTEM_PYTHON, "needs root, to be another user")
    def test_another_user_of_the_host_reaches_nothing(self):
        user = self.user()
        url = self.up("--for", str(user.pid)).stdout.strip()
        status, store, _ = call(url, "POST", "/stores", {"template": "gallery", "fixtures": ["artists"]})
        self.assertEqual(status, 201)
        # What another local user tries, knowing the port (from /proc/net/tcp) and the id.
        probe = """
import json, sys, urllib.request, urllib.error
out = []
for method, path, body in [("GET", "/stores", None), ("GET", "/stores/%s/counts", None),
                           ("POST", "/stores/%s/query", b'{"sql": "SELECT 1"}'), ("DELETE", "/stores/%s", None),
                           ("GET", "/health", None), ("GET", "/", None)]:
    request = urllib.request.Request(sys.argv[1] + path.replace("%s", sys.argv[2]), data=body, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            out.append([answer.status, answer.read().decode()])
    except urllib.error.HTTPError as error:
        out.append([error.code, error.read().decode()])
print(json.dumps(out))
"""
        done = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", SYSTEM_PYTHON, "-c", probe,
                               url, store["id"]], capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        for status, body in json.loads(done.stdout):
            self.assertEqual(status, 403, body)
            self.assertEqual(json.loads(body)["error"]["code"], "forbidden")
            self.assertIn("serves only its own user's processes", body)
        # Nothing was done: the store and its rows are there, for its own user.
        self.assertEqual(call(url, "GET", "/stores/%s/counts" % store["id"]).body["counts"]["artists"], store["counts"]["artists"])
        self.end(user)

    def test_a_temporary_folder_others_can_change_is_not_used_for_the_runs_state(self):
        # A scratch folder anyone may write, not sticky: another user could
        # swap what is made in it. The run's state goes to /tmp instead.
        shared = os.path.join(self.scratch, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o777)
        os.chmod(self.scratch, 0o755)
        user = self.user()
        done = self.up("--for", str(user.pid), env={"TMPDIR": shared})
        url = done.stdout.strip()
        self.assertEqual(call(url, "GET", "/health").body["status"], "ok")
        self.assertEqual(os.listdir(shared), [])
        status, store, _ = call(url, "POST", "/stores", {})
        self.assertEqual(status, 201)
        self.assertTrue(store["path"].startswith("/tmp/larder-%d/" % os.getuid()), store["path"])
        pid = next(p for p in os.listdir("/proc") if p.isdigit() and self.serves_url(p, url))
        self.end(user)
        self.assertTrue(wait_until(lambda: not running(int(pid)), 10))

    def serves_url(self, pid, url):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                arguments = f.read().split(b"\0")
        except OSError:
            return False
        return b"--shared" in arguments and b"serve" in arguments and any(
            os.path.isfile(os.path.join(a.decode(), "server.json")) and url in open(os.path.join(a.decode(), "server.json")).read()
            for a in arguments if a.startswith(b"/tmp/larder-"))

    def test_fixtures_above_the_project_in_a_folder_anyone_may_write_are_not_taken(self):
        # /tmp/job-1234/ (anyone may write it) holds a planted fixtures/; the
        # project below it has no marker and no fixtures of its own.
        job = os.path.join(self.scratch, "job")
        os.mkdir(job)
        os.chmod(job, 0o1777)
        shutil.copytree(os.path.join(REPO, "fixtures", "gallery"), os.path.join(job, "fixtures", "planted"))
        project = os.path.join(job, "project")
        os.mkdir(project)
        user = self.user()
        url = self.up("--for", str(user.pid), cwd=project).stdout.strip()
        self.assertEqual(call(url, "GET", "/templates").body["templates"], [])
        # A fixtures folder of the project itself, found by convention, is taken as before.
        shutil.copytree(os.path.join(REPO, "fixtures", "gallery"), os.path.join(project, "fixtures", "gallery"))
        url = self.up("--for", str(user.pid), cwd=project).stdout.strip()
        self.assertEqual([t["name"] for t in call(url, "GET", "/templates").body["templates"]], ["gallery"])
        self.end(user)
        self.assertTrue(wait_until(lambda: self.folders() == [], 10))

    def test_a_planted_state_naming_a_running_process_of_the_user_does_not_get_it_signalled(self):
        user, state = self.ended_server(signal.SIGKILL)
        # A live process of this user, named with its own true start time.
        bystander = self.user()
        with open("/proc/%d/stat" % bystander.pid) as f:
            started = f.read().rsplit(")", 1)[1].split()[19]
        folder = os.path.join(self.tmp, "larder-%d" % os.getuid(), self.folders()[0])
        with open(os.path.join(folder, "server.json"), "w") as f:
            json.dump({"url": "http://127.0.0.1:9", "pid": bystander.pid, "started": started}, f)
        url = self.up("--for", str(user.pid)).stdout.strip()
        self.assertEqual(call(url, "GET", "/health").body["status"], "ok")
        self.assertIsNone(bystander.poll(), "a process that is not the run's server was signalled")
        self.end(user)
        self.end(bystander)
        self.assertTrue(wait_until(lambda: self.folders() == [], 10))

    def test_the_default_process_is_the_caller(self):
        # A shell that runs `larder up` and then lives on: it is the process served.
        shell = subprocess.Popen(["sh", "-c", '"$0" up && exec sleep 600', BINARY], cwd=self.project, env=clean_environment(TMPDIR=self.tmp),
                                 stdout=subprocess.PIPE, text=True)
        self.users.append(shell)
        url = shell.stdout.readline().strip()
        self.assertEqual(call(url, "GET", "/health").body["status"], "ok")
        [state] = self.states()
        self.end(shell)
        self.assertTrue(wait_until(lambda: not running(state["pid"])))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
