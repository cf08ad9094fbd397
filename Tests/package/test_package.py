#!/usr/bin/env python3
"""What scripts/package ships, tried as a machine without Swift would:

- the tarball's binary needs no Swift library (ldd), and warms, serves and
  answers the sample fixtures with the toolchain hidden (a tmpfs over it, in
  a mount namespace of its own) and only /usr/bin:/bin on PATH;
- the .deb declares the runtime libraries and carries the binary, the unit
  (which systemd-analyze verifies) and the maintainer scripts;
- the image: deploy/Dockerfile's runtime stage, instruction by instruction,
  in a clean Debian bookworm (debootstrap --variant=minbase, what
  debian:bookworm-slim is): the .deb installed with apt, WARM=1, the
  entrypoint started as root, the HEALTHCHECK command, stores of the group
  larder, and a root on a host path that belongs to root.

    python3 Tests/package/test_package.py DIST_DIR

No Docker engine runs here, so the image is checked that way. The chroot
and namespace tests need root (CI machines here have it); with CI=true they
fail rather than skip. The clean Debian is made once and kept as a tarball
under ${XDG_CACHE_HOME:-~/.cache}/larder/.
"""
import glob
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest
import zipfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from calls import call, metric  # noqa: E402
from processes import REPO, free_port, listening, stop  # noqa: E402

DIST = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "dist"))
IN_CI = os.environ.get("CI") == "true"
IS_ROOT = os.geteuid() == 0
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "larder")
CLEAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def only(pattern):
    found = glob.glob(os.path.join(DIST, pattern))
    if len(found) != 1:
        raise SystemExit("expected one %s in %s, found %s: run scripts/package first" % (pattern, DIST, found))
    return found[0]


TARBALL = only("larder-*-linux-*.tar.gz")
# The Python client's platform wheel, with the server inside (clients/python/package.sh).
JAR = next(iter(glob.glob(os.path.join(DIST, "larder-client-*[0-9].jar"))), None)
JAVA_LIBS = os.environ.get("JAVA_LIBS", "/usr/share/java")
NODE_TARBALL = next(iter(glob.glob(os.path.join(DIST, "larder-sqlite-*.tgz"))), None)
WHEEL = next(iter(glob.glob(os.path.join(DIST, "larder_sqlite-*-manylinux*_%s.whl" % os.uname().machine))), None)
DEB = only("larder_*_*.deb")
VERSION = re.match(r"larder-(.+)-linux-", os.path.basename(TARBALL)).group(1)


def apt_mirror():
    """The Debian archive this machine's apt uses (a clean Debian comes from the same place)."""
    texts = []
    for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*")):
        if os.path.isfile(path):
            with open(path) as f:
                texts.append(f.read())
    text = "\n".join(texts)
    # one-line style: deb [options] URI SUITE ...; deb822 style: URIs: then Suites:
    found = re.findall(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+\w+(?:-updates)?\s", text, re.M)
    found += [uri for stanza in re.split(r"\n\s*\n", text) if re.search(r"^Types:.*\bdeb\b", stanza, re.M)
              and not re.search(r"^Suites:.*-security", stanza, re.M) for uri in re.findall(r"^URIs:\s*(\S+)", stanza, re.M)]
    if not found:
        raise SystemExit("no Debian archive in /etc/apt/sources.list*: debootstrap needs one")
    return found[0]


def needs_root(reason):
    """Skips without root, unless in CI, where a skip would hide a missing test."""
    if IS_ROOT or IN_CI:
        return lambda test: test
    return unittest.skip("needs root: " + reason)


class TarballTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.scratch = tempfile.mkdtemp(prefix="larder-package-")
        with tarfile.open(TARBALL) as t:
            t.extractall(cls.scratch)
        cls.tree = os.path.join(cls.scratch, "larder-%s-linux-%s" % (VERSION, os.uname().machine))
        cls.binary = os.path.join(cls.tree, "larder")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.scratch, ignore_errors=True)

    def test_the_tarball_holds_the_binary_its_notices_and_the_unit(self):
        for name in ["larder", "README.md", "LICENSE", "NOTICE", "larder.service", "licenses/swift.txt", "fixtures/gallery",
                     "completions/larder.bash", "completions/_larder", "completions/larder.fish", "larder.1"]:
            self.assertTrue(os.path.exists(os.path.join(self.tree, name)), name)
        self.assertTrue(os.access(self.binary, os.X_OK))

    def test_ldd_shows_no_swift_library(self):
        ldd = subprocess.run(["ldd", self.binary], capture_output=True, text=True, check=True).stdout
        self.assertNotRegex(ldd.lower(), r"swift|foundation|dispatch|blocksruntime|icu")
        self.assertNotIn("not found", ldd)
        for library in ["libmicrohttpd.so.12", "libsqlite3.so.0", "libcrypto.so.3", "libz.so.1", "libisal.so.2"]:
            self.assertIn(library, ldd)
        # libcurl is loaded when a bucket is named, never linked: none of its libraries in every install.
        self.assertNotIn("libcurl", ldd)

    def test_the_binary_carries_no_icu(self):
        """The server imports FoundationEssentials only: all of Foundation
        would link FoundationInternationalization and ICU's data into it."""
        with open(self.binary, "rb") as f:
            data = f.read()
        for marker in [b"FoundationInternationalization", b"_FoundationICU", b"icudt"]:
            self.assertNotIn(marker, data, "the binary links %s again: which import Foundation or API of it brought it back?" % marker.decode())
        self.assertLess(len(data), 24 * 1024 * 1024)

    def run_hidden(self, *arguments, **options):
        """Runs the tarball's binary with the Swift toolchain out of sight."""
        command = ["env", "-i", "PATH=/usr/bin:/bin", "HOME=" + self.scratch, self.binary, *arguments]
        swift = shutil.which("swift")
        toolchain = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(swift)))) if swift else None
        if toolchain and not toolchain.startswith("/usr") and (IS_ROOT or IN_CI):
            # A tmpfs over the toolchain, seen by this command alone. No --fork:
            # unshare execs the shell, which execs larder, so signals reach it.
            command = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                       'mount -t tmpfs none "$0" && exec "$@"', toolchain] + command
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **options)

    def finish(self, process, timeout=60):
        out, _ = process.communicate(timeout=timeout)
        return process.returncode, out

    def test_warm_then_serve_the_sample_fixtures_without_a_toolchain(self):
        self.assertEqual(self.finish(self.run_hidden("--version")), (0, VERSION + "\n"))
        root = os.path.join(self.scratch, "root")
        fixtures = os.path.join(self.tree, "fixtures")
        began = time.monotonic()
        code, out = self.finish(self.run_hidden("warm", "--root", root, "--fixtures", fixtures))
        print("\n    larder warm of the sample fixtures: %.0f ms (%s)" % ((time.monotonic() - began) * 1000, out.strip().splitlines()[-1]),
              file=sys.stderr)
        self.assertEqual(code, 0, out)
        self.assertIn("6 cache entries ready", out)

        server = self.run_hidden("serve", "--port", "0", "--root", root, "--fixtures", fixtures, "--log-level", "error")
        try:
            base = listening(server, "the tarball's binary")
            code, out = self.finish(self.run_hidden("health", "--url", base))
            self.assertEqual(code, 0, out)
            self.assertIn("ok: larder " + VERSION, out)
            status, store, _ = call(base, "POST", "/stores", {"template": "gallery", "fixtures": ["artists", "artworks"]})
            self.assertEqual(status, 201)
            self.assertEqual(store["counts"]["artworks"], 12)
            for request in [{"template": "gallery"}, {"template": "gallery", "snapshot": "v2"}, {"template": "boardgames", "snapshot": "v1"}]:
                self.assertEqual(call(base, "POST", "/stores", request)[0], 201)
            # The three warmed stores were copies; the one with named fixtures was built.
            self.assertEqual(metric(base, "larder_template_cache_hits_total"), 3)
            self.assertEqual(metric(base, "larder_template_cache_misses_total"), 1)
            # warm beside a running server refuses rather than disturb it.
            code, out = self.finish(self.run_hidden("warm", "--root", root, "--fixtures", fixtures))
            self.assertEqual(code, 2, out)
            self.assertIn("in use by another Larder", out)
        finally:
            stop(server)
        self.assertEqual(server.returncode, 0)
        began = time.monotonic()
        code, out = self.finish(self.run_hidden("health", "--url", base, "--timeout", "1"))
        self.assertEqual(code, 1, out)
        self.assertLess(time.monotonic() - began, 5)
        code, out = self.finish(self.run_hidden("health", "--url", base, "--wait", "1"))
        self.assertEqual(code, 1, out)


class DebTests(unittest.TestCase):
    def dpkg_deb(self, *arguments):
        return subprocess.run(["dpkg-deb", *arguments], capture_output=True, text=True, check=True).stdout

    def test_info_declares_the_runtime_libraries(self):
        info = self.dpkg_deb("--info", DEB)
        depends = re.search(r"^ Depends: (.*)$", info, re.M).group(1)
        names = [d.strip().split(" ")[0] for d in depends.split(",")]
        for package in ["libc6", "libmicrohttpd12", "libsqlite3-0", "libssl3", "zlib1g", "libisal2", "passwd"]:
            self.assertIn(package, names)
        self.assertRegex(info, r"(?m)^ Recommends: libcurl4$")
        self.assertNotIn("swift", depends.lower())
        self.assertIn(" Version: " + VERSION, info)
        for script in ["postinst", "prerm", "postrm"]:
            self.assertIn(script, info)

    def test_contents_are_the_binary_the_unit_and_the_settings(self):
        contents = self.dpkg_deb("--contents", DEB)
        for path in ["./usr/bin/larder", "./lib/systemd/system/larder.service", "./etc/default/larder",
                     "./usr/lib/tmpfiles.d/larder.conf", "./usr/share/doc/larder/copyright", "./usr/share/larder/fixtures/gallery/",
                     "./usr/share/bash-completion/completions/larder", "./usr/share/zsh/vendor-completions/_larder",
                     "./usr/share/fish/vendor_completions.d/larder.fish", "./usr/share/man/man1/larder.1.gz"]:
            self.assertRegex(contents, r"\s%s\n" % re.escape(path), path)
        self.assertRegex(contents, r"-rwxr-xr-x root/root .* \./usr/bin/larder\n")
        self.assertEqual(self.dpkg_deb("--info", DEB, "conffiles").split(), ["/etc/default/larder"])

    def test_the_unit_verifies_and_the_binary_is_the_tarballs(self):
        scratch = tempfile.mkdtemp(prefix="larder-deb-")
        try:
            self.dpkg_deb("-x", DEB, scratch)
            with tarfile.open(TARBALL) as t:
                packed = t.extractfile("larder-%s-linux-%s/larder" % (VERSION, os.uname().machine)).read()
            with open(os.path.join(scratch, "usr/bin/larder"), "rb") as f:
                self.assertEqual(f.read(), packed, "the .deb and the tarball ship one binary")
            if not shutil.which("systemd-analyze"):
                self.skipTest("no systemd-analyze")
            unit = os.path.join(scratch, "larder.service")
            with open(os.path.join(scratch, "lib/systemd/system/larder.service")) as f:
                text = f.read()
            with open(unit, "w") as f:  # the binary where it was unpacked
                f.write(text.replace("/usr/bin/larder", os.path.join(scratch, "usr/bin/larder")))
            verify = subprocess.run(["systemd-analyze", "verify", unit], capture_output=True, text=True)
            self.assertEqual((verify.returncode, verify.stdout + verify.stderr), (0, ""))
            directives = [line.split("=", 1)[0] for line in text.splitlines() if "=" in line and not line.startswith("#")]
            self.assertIn("User", directives)
            self.assertNotIn("DynamicUser", directives)
            self.assertNotIn("RestrictSUIDSGID", directives, "store directories are setgid")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


class Dockerfile:
    """The runtime stage of deploy/Dockerfile: its instructions in order."""

    def __init__(self, path):
        with open(path) as f:
            text = f.read()
        lines, current = [], ""
        for raw in text.splitlines():
            if not current and (not raw.strip() or raw.lstrip().startswith("#")):
                continue
            current += raw.rstrip()[:-1] + " " if raw.rstrip().endswith("\\") else raw
            if not raw.rstrip().endswith("\\"):
                lines.append(current.strip())
                current = ""
        stages = [i for i, line in enumerate(lines) if line.upper().startswith("FROM ")]
        self.build_workdir = next(l.split(None, 1)[1] for l in lines[stages[0]:stages[-1]] if l.upper().startswith("WORKDIR "))
        self.instructions = [tuple(l.split(None, 1)) for l in lines[stages[-1] + 1:]]

    def exec_form(self, name):
        values = [json.loads(v) for k, v in self.instructions if k == name]
        return values[-1] if values else None

    def healthcheck(self):
        value = next(v for k, v in self.instructions if k == "HEALTHCHECK")
        return json.loads(value[value.index("CMD") + 3:].strip())


class CleanDebian(unittest.TestCase):
    """A clean Debian bookworm (debootstrap --variant=minbase, what
    debian:bookworm-slim is) in a folder of its own, and commands run in it."""

    @staticmethod
    def clean_debian(extra_packages=()):
        """The tarball of a clean Debian (with `extra_packages` from apt), made once and cached."""
        name = "debian-bookworm-minbase%s.tar" % "".join("-" + p for p in extra_packages)
        tarball = os.path.join(CACHE, name)
        if not os.path.exists(tarball):
            os.makedirs(CACHE, exist_ok=True)
            target = tempfile.mkdtemp(prefix="larder-debootstrap-")
            if extra_packages:
                subprocess.run(["tar", "-C", target, "-xf", CleanDebian.clean_debian()], check=True)
                shutil.copy("/etc/resolv.conf", os.path.join(target, "etc/resolv.conf"))
                install = "apt-get update -qq && apt-get install -y -qq --no-install-recommends %s >/dev/null && rm -rf /var/lib/apt/lists/*"
                # With a /proc of its own: some packages' scripts need one (Java's). apt's chatter is shown only on failure.
                done = subprocess.run(["unshare", "--mount", "--pid", "--fork", "--mount-proc=" + os.path.join(target, "proc"),
                                       "chroot", target, "/bin/sh", "-c", install % " ".join(extra_packages)],
                                      env={"PATH": CLEAN_PATH, "DEBIAN_FRONTEND": "noninteractive"},
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                if done.returncode != 0:
                    raise RuntimeError("apt-get install %s in a clean Debian failed:\n%s" % (" ".join(extra_packages), done.stdout))
            else:
                subprocess.run(["debootstrap", "--variant=minbase", "bookworm", target, apt_mirror()],
                               check=True, stdout=subprocess.DEVNULL)
            subprocess.run(["tar", "-C", target, "-cf", tarball + ".part", "."], check=True)
            os.rename(tarball + ".part", tarball)
            shutil.rmtree(target, ignore_errors=True)
        return tarball

    @classmethod
    def unpack_debian(cls, extra_packages=()):
        cls.chroot = tempfile.mkdtemp(prefix="larder-debian-")
        subprocess.run(["tar", "-C", cls.chroot, "-xf", cls.clean_debian(extra_packages)], check=True)
        os.chmod(cls.chroot, 0o755)  # its / (mkdtemp makes 0700), which other users must pass
        shutil.copy("/etc/resolv.conf", os.path.join(cls.chroot, "etc/resolv.conf"))
        cls.env = {"PATH": CLEAN_PATH, "HOME": "/root"}

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["umount", "-R", os.path.join(cls.chroot, "proc")], stderr=subprocess.DEVNULL)
        shutil.rmtree(cls.chroot, ignore_errors=True)

    def run_sample(self, command, what):
        """Runs `command` in /project of the chroot, a sample run with three
        tests of which one fails on purpose (it writes /project/first-store,
        the time of its first store), and checks what a new team would
        see: the command failed for that test, the failed test's artifact
        is a zip holding its database, and 5 s later nothing of Larder's
        runs and its folder is gone. Answers the command's output."""
        script = ('cd /project && started=$(date +%s.%N) && ' + command + '; echo "sample exit $?"; '
                  'echo "$started" > /project/started' + SETTLE)
        done = self.inside(["/bin/sh", "-c", script], capture_output=True, text=True, timeout=600)
        out = done.stdout + done.stderr
        self.assertIn("sample exit 1", out)
        self.assertIn("left: 0 running: 0", out, "the server stopped and removed its folder after the run")
        with open(os.path.join(self.chroot, "project", "started")) as f:
            started = float(f.read())
        with open(os.path.join(self.chroot, "project", "first-store")) as f:
            print("\n    %s start to the first store, self-started server: %.2f s" % (what, float(f.read()) - started), file=sys.stderr)
        artifacts = glob.glob(os.path.join(self.chroot, "project", "larder-artifacts", "*ails*n*urpose*.zip"))
        self.assertEqual(len(artifacts), 1, out)
        with zipfile.ZipFile(artifacts[0]) as z:
            database = next(n for n in z.namelist() if n.endswith(".sqlite"))
            self.assertGreater(len(z.read(database)), 0)
        return out

    @classmethod
    def inside(cls, command, env=None, popen=False, **options):
        """Runs `command` in the chroot, with its own /proc (Swift reads its
        arguments there) in a pid namespace of its own: when the command
        ends, whatever it left running is killed with it."""
        full = ["unshare", "--mount", "--pid", "--fork", "--mount-proc=" + os.path.join(cls.chroot, "proc"),
                "chroot", cls.chroot, "env", "-i"] + ["%s=%s" % kv for kv in (env or cls.env).items()] + command
        return subprocess.Popen(full, **options) if popen else subprocess.run(full, **options)


@needs_root("debootstrap, chroot and namespaces")
class ImageTests(CleanDebian):
    """deploy/Dockerfile's runtime stage run in a clean Debian, without Docker."""

    @classmethod
    def setUpClass(cls):
        cls.unpack_debian()
        cls.dockerfile = Dockerfile(os.path.join(REPO, "deploy/Dockerfile"))
        build_args = {"WARM": "1"}  # the warm image: one build argument away
        for instruction, value in cls.dockerfile.instructions:
            if instruction == "RUN":
                # What docker build would print (apt's, debconf's) is shown only when a step fails.
                done = cls.inside(["/bin/sh", "-c", value], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                if done.returncode != 0:
                    raise RuntimeError("RUN %s failed (%d):\n%s" % (value, done.returncode, done.stdout))
            elif instruction == "COPY":
                parts = value.split()
                sources, target = parts[:-1], parts[-1]
                for source in sources:
                    if source.startswith("--from="):
                        continue
                    if "--from=build" in sources:  # the build stage is the repository after scripts/package
                        source = os.path.join(REPO, os.path.relpath(source, cls.dockerfile.build_workdir))
                    else:
                        source = os.path.join(REPO, source)
                    for found in glob.glob(source):
                        destination = cls.chroot + target
                        if target.endswith("/"):
                            destination = os.path.join(destination, os.path.basename(found))
                        os.makedirs(os.path.dirname(destination), exist_ok=True)
                        shutil.copy2(found, destination)
            elif instruction == "ENV":
                cls.env.update(dict(p.split("=", 1) for p in shlex.split(value)))
            elif instruction == "ARG":
                name, _, default = value.partition("=")
                cls.env[name] = build_args.get(name, default)
        cls.env.pop("WARM", None)  # ARG values are the build's, not the container's

    def container(self, **extra):
        """The container as `docker run` starts it: ENTRYPOINT + CMD, as root."""
        env = dict(self.env, LARDER_PORT=str(free_port()), LARDER_TOKEN="image-token", **extra)
        command = self.dockerfile.exec_form("ENTRYPOINT") + self.dockerfile.exec_form("CMD")
        process = self.inside(command, env=env, popen=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(self.stop_container, process)
        base = "http://127.0.0.1:" + env["LARDER_PORT"]
        return process, base, env

    @staticmethod
    def stop_container(process):
        """As `docker stop`: SIGTERM to the container's first process. unshare,
        which forked it, holds SIGTERM back while it waits, so the signal goes
        to its child (the server: the entrypoint execs larder)."""
        if process.poll() is None:
            with open("/proc/%d/task/%d/children" % (process.pid, process.pid)) as f:
                for child in f.read().split():
                    os.kill(int(child), signal.SIGTERM)
        stop(process)

    def test_the_image_has_the_libcurl_a_bucket_needs(self):
        """--cache-url and --artifacts-url load libcurl when a bucket is named: the image installs it."""
        self.assertTrue(glob.glob(os.path.join(self.chroot, "usr/lib/*/libcurl.so.4")))

    def test_the_stage_declares_the_volume_health_check_and_entrypoint(self):
        self.assertEqual(self.dockerfile.healthcheck(), ["larder", "health"])
        volumes = [v for k, v in self.dockerfile.instructions if k == "VOLUME"]
        self.assertEqual(volumes, ["/var/lib/larder"])
        self.assertTrue(self.env["LARDER_ROOT"].startswith("/var/lib/larder/"))
        self.assertEqual(self.env["LARDER_STORE_MODE"], "0660")
        self.assertEqual(self.env["LARDER_FIXTURES"], "/srv/larder/fixtures")
        # The .deb put the samples where its settings point (the server refuses a missing fixtures folder).
        self.assertTrue(os.path.isdir(os.path.join(self.chroot, "srv/larder/fixtures/gallery")))
        self.assertFalse(os.path.exists(os.path.join(self.chroot, "srv/larder/fixtures/fixtures")))
        self.assertFalse(os.path.exists(os.path.join(self.chroot, "opt/swift")) or glob.glob(os.path.join(self.chroot, "usr/lib/swift*")))

    def test_the_container_serves_warm_healthy_and_as_larder(self):
        process, base, env = self.container()
        listening(process, "the container", timeout=300)
        health = self.inside(self.dockerfile.healthcheck(), env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(health.returncode, 0, health.stdout + health.stderr)
        status, store, _ = call(base, "POST", "/stores", {"template": "gallery"}, token="image-token")
        self.assertEqual(status, 201)
        self.assertEqual(metric(base, "larder_template_cache_misses_total", token="image-token"), 0, "WARM=1 built it in the image")
        on_disk = os.path.join(self.chroot, store["path"].lstrip("/"))
        info, folder = os.stat(on_disk), os.stat(os.path.dirname(on_disk))
        self.assertEqual((info.st_uid, info.st_gid, info.st_mode & 0o7777), (7464, 7464, 0o660), "the server runs as larder")
        self.assertTrue(folder.st_mode & 0o2000, "setgid store directories")
        self.stop_container(process)
        self.assertEqual(process.returncode, 0, "larder stopped cleanly on SIGTERM")
        health = self.inside(self.dockerfile.healthcheck(), env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(health.returncode, 1)

    def test_a_root_on_a_host_path_that_docker_made_is_handed_to_larder(self):
        host_path = os.path.join(self.chroot, "tmp/larder-host")
        os.makedirs(host_path)
        os.chown(host_path, 0, 0)
        process, base, _ = self.container(LARDER_ROOT="/tmp/larder-host/root")
        listening(process, "the container on a root-owned host path", timeout=300)
        self.assertEqual(call(base, "POST", "/stores", {"template": "boardgames"}, token="image-token")[0], 201)
        self.assertEqual(os.stat(host_path).st_uid, 7464)


# The sample project a new team would have: a fixtures/ folder and tests that
# ask for a store each, one of which fails on purpose.
SAMPLE_TEST = """
import os
import time

import pytest


@pytest.mark.larder(template="gallery", fixtures=["artists"])
def test_first(larder_store):
    if not os.path.exists("/project/first-store"):
        with open("/project/first-store", "w") as f:
            f.write(repr(time.time()))
    assert larder_store.counts()["artists"] == 4


@pytest.mark.larder(template="gallery")
def test_second(larder_store):
    assert larder_store.counts()["artists"] == 0


@pytest.mark.larder(template="gallery", fixtures=["artists"])
def test_fails_on_purpose(larder_store):
    larder_store.query("DELETE FROM artists")
    assert larder_store.counts()["artists"] == 4
"""

# After a sample project's run in the clean Debian: wait up to 5 s until the
# server's folder is gone and no larder runs, then say what is left.
SETTLE = """
state() { echo "left: $(ls -A /tmp/larder-0 2>/dev/null | wc -l) running: $(for p in /proc/[0-9]*; do readlink $p/exe; done 2>/dev/null | grep -c '/larder$')"; }
i=0; while [ $i -lt 100 ] && [ "$(state)" != "left: 0 running: 0" ]; do sleep 0.05; i=$((i+1)); done
state"""


@needs_root("debootstrap, chroot and namespaces")
@unittest.skipUnless(WHEEL or IN_CI, "no Python wheel in dist/")
class WheelTests(CleanDebian):
    """The Python package as a new team meets it: a clean Debian 12 with only
    python3 and python3-venv from apt (no libmicrohttpd, no SQLite tools, no
    Swift), the wheel from dist/ pip-installed into a virtual environment,
    and pytest run in a project with a fixtures/ folder and no server
    named anywhere."""

    @classmethod
    def setUpClass(cls):
        cls.unpack_debian(extra_packages=("python3", "python3-venv"))
        wheelhouse = os.path.join(cls.chroot, "wheelhouse")
        os.makedirs(wheelhouse)
        shutil.copy(WHEEL, wheelhouse)
        # pytest's wheels for the chroot's Python (Debian 12's 3.11), fetched here.
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", wheelhouse, "--only-binary", ":all:",
                        "--python-version", "3.11", "--platform", "manylinux2014_x86_64", "pytest==8.4.2"], check=True)
        cls.inside(["/bin/sh", "-c", "python3 -m venv /venv && /venv/bin/pip install -q --no-index --find-links /wheelhouse "
                    "/wheelhouse/%s pytest" % os.path.basename(WHEEL)], check=True)
        project = os.path.join(cls.chroot, "project")
        os.makedirs(os.path.join(project, "tests"))
        shutil.copytree(os.path.join(REPO, "fixtures", "gallery"), os.path.join(project, "fixtures", "gallery"))
        with open(os.path.join(project, "tests", "test_sample.py"), "w") as f:
            f.write(SAMPLE_TEST)

    def test_the_chroot_has_none_of_the_servers_libraries(self):
        lib = os.path.join(self.chroot, "usr/lib/x86_64-linux-gnu")
        self.assertFalse(glob.glob(os.path.join(lib, "libmicrohttpd*")))
        # (GnuTLS is there: apt itself uses it.)
        self.assertFalse(os.path.exists(os.path.join(self.chroot, "opt/swift")))
        self.assertFalse(glob.glob(os.path.join(self.chroot, "usr/lib/swift*")))

    def test_pytest_gets_a_store_per_test_from_the_server_in_the_wheel(self):
        out = self.run_sample("/venv/bin/pytest -q -p no:cacheprovider tests", "pytest")
        self.assertRegex(out, r"1 failed, 2 passed")
        self.assertRegex(out, r"larder.*kept|kept.*larder|artifact", "the report says where the failed test's store went")


# Debian 12's Node is 18: the helper's own `test` tells it whether a test failed.
NODE_SAMPLE_TEST = """
import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { test, withStore } from 'larder-sqlite/test';

test('first', async (t) => {
  const store = await withStore(t, { template: 'gallery', fixtures: ['artists'] });
  if (!existsSync('/project/first-store')) writeFileSync('/project/first-store', String(Date.now() / 1000));
  assert.equal((await store.counts({ tables: ['artists'] })).artists, 4);
});

test('second', async (t) => {
  const store = await withStore(t, { template: 'gallery' });
  assert.equal((await store.counts({ tables: ['artists'] })).artists, 0);
});

test('fails on purpose', async (t) => {
  const store = await withStore(t, { template: 'gallery', fixtures: ['artists'] });
  await store.query('DELETE FROM artists');
  assert.equal((await store.counts({ tables: ['artists'] })).artists, 4);
});
"""


@needs_root("debootstrap, chroot and namespaces")
@unittest.skipUnless(NODE_TARBALL or IN_CI, "no Node tarball in dist/")
class NodeTarballTests(CleanDebian):
    """The Node package as a new team meets it: a clean Debian 12 with only
    nodejs from apt, the tarball from dist/ installed into a project's
    node_modules as npm installs a package without dependencies (unpacked;
    Debian's npm would bring hundreds of packages into the clean system),
    and `node --test` run with no server named anywhere."""

    @classmethod
    def setUpClass(cls):
        cls.unpack_debian(extra_packages=("nodejs",))
        project = os.path.join(cls.chroot, "project")
        installed = os.path.join(project, "node_modules", "larder-sqlite")
        os.makedirs(installed)
        subprocess.run(["tar", "-xzf", NODE_TARBALL, "-C", installed, "--strip-components=1", "--no-same-owner"], check=True)
        shutil.copytree(os.path.join(REPO, "fixtures", "gallery"), os.path.join(project, "fixtures", "gallery"))
        with open(os.path.join(project, "package.json"), "w") as f:
            json.dump({"name": "sample", "private": True, "type": "module"}, f)
        os.makedirs(os.path.join(project, "test"))
        with open(os.path.join(project, "test", "sample.test.js"), "w") as f:
            f.write(NODE_SAMPLE_TEST)

    def test_node_test_gets_a_store_per_test_from_the_server_in_the_tarball(self):
        out = self.run_sample("node --test test/", "node --test")
        self.assertRegex(out, r"# pass 2")
        self.assertRegex(out, r"# fail 1")


JAVA_SAMPLE_TEST = """
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.larder.Store;
import dev.larder.junit.LarderExtension;
import dev.larder.junit.LarderStore;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

@ExtendWith(LarderExtension.class)
class SampleTest {
    static void mark() throws Exception {
        Path marker = Path.of("/project/first-store");
        if (!Files.exists(marker)) Files.writeString(marker, Double.toString(System.currentTimeMillis() / 1000.0));
    }

    @Test
    void first(@LarderStore(template = "gallery", fixtures = {"artists"}) Store store) throws Exception {
        mark();
        assertEquals(4L, store.counts("artists").get("artists"));
    }

    @Test
    void second(@LarderStore(template = "gallery") Store store) throws Exception {
        mark();
        assertEquals(0L, store.counts("artists").get("artists"));
    }

    @Test
    void failsOnPurpose(@LarderStore(template = "gallery", fixtures = {"artists"}) Store store) throws Exception {
        mark();
        store.query("DELETE FROM artists");
        assertEquals(4L, store.counts("artists").get("artists"));
    }
}
"""

@needs_root("debootstrap, chroot and namespaces")
@unittest.skipUnless(JAR or IN_CI, "no Java jar in dist/")
class JarTests(CleanDebian):
    """The Java package as a new team meets it: a clean Debian 12 with only a
    Java runtime from apt, the jar from dist/ and JUnit's console launcher
    on the class path (what Maven or Gradle would put there), and a test
    class using the extension run with no server named anywhere."""

    @classmethod
    def setUpClass(cls):
        cls.unpack_debian(extra_packages=("openjdk-17-jre-headless",))
        project = os.path.join(cls.chroot, "project")
        os.makedirs(os.path.join(project, "src"))
        shutil.copytree(os.path.join(REPO, "fixtures", "gallery"), os.path.join(project, "fixtures", "gallery"))
        with open(os.path.join(project, "src", "SampleTest.java"), "w") as f:
            f.write(JAVA_SAMPLE_TEST)
        # Compiled here, as a build tool would before running the tests.
        subprocess.run(["javac", "--release", "17", "-d", os.path.join(project, "classes"),
                        "-cp", "%s:%s/junit-jupiter-api.jar:%s/apiguardian-api.jar" % (JAR, JAVA_LIBS, JAVA_LIBS),
                        os.path.join(project, "src", "SampleTest.java")], check=True)
        os.makedirs(os.path.join(cls.chroot, "opt", "test"))
        shutil.copy(JAR, os.path.join(cls.chroot, "opt", "test", "larder-client.jar"))
        shutil.copy(os.path.join(JAVA_LIBS, "junit-platform-console-standalone.jar"), os.path.join(cls.chroot, "opt", "test"))

    def test_junit_gets_a_store_per_test_from_the_server_in_the_jar(self):
        out = self.run_sample("java -jar /opt/test/junit-platform-console-standalone.jar --disable-banner --details=summary "
                              "--class-path /opt/test/larder-client.jar:/project/classes --select-class SampleTest",
                              "JUnit (the server unpacked from the jar)")
        self.assertRegex(out, r"2 tests successful")
        self.assertRegex(out, r"1 tests failed")
        # Unpacked once into the user's cache, and run from there.
        self.assertTrue(glob.glob(os.path.join(self.chroot, "root", ".cache", "larder", "*", "*", "larder")))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[2:])
