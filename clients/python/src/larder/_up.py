"""Where a test helper's server comes from (clients/README.md): a URL when
one is given, else the shared server of the test run, which `larder up`
starts (or finds running) and whose URL it prints.

    url = larder.start_server()                  # this process; the binary found as below
    url = larder.start_server(runner_pid=os.getppid(), fixtures="tests/fixtures")
    client = larder.Client.for_tests()           # $LARDER_URL, else start_server()'s URL

The binary is, in this order: the caller's (`binary=`), $LARDER_BINARY, the
one shipped inside this package (the platform wheels carry it in
larder/_server/), `larder` on PATH. The server lives while any process it
serves lives and stops, removing its folder, a second after the last one
has ended: there is nothing to stop at exit.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from typing import Dict, List, Optional, Sequence, Tuple, Union

from ._client import DEFAULT_TIMEOUT, LarderError

__all__ = ["NO_SERVER", "SHIPPED_BINARY", "find_binary", "start_server", "url_for_tests"]

# The one sentence every Larder test helper fails with (clients/README.md).
NO_SERVER = ("Larder: no server to use: set LARDER_URL to a running server's URL, or install the larder binary "
             "(set LARDER_BINARY to it, or put it on PATH)")

# The server binary of the platform wheels, with its shared libraries in lib/ beside it.
SHIPPED_BINARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_server", "larder")

# The URL `larder up` printed, per process and request: asked once per process
# when it answers; a failure is not kept, so the next call runs it again.
_started: Dict[Tuple[object, ...], str] = {}
_lock = threading.Lock()

# The pauses before running a `larder up` that exited non-zero again, within
# one call: one that joins a server as it stops can fail, and a moment later
# it starts a new one (issue 43).
_RETRY_DELAYS = (0.2, 0.5)
_sleep = time.sleep  # the tests count the pauses instead of taking them

PathLike = Union[str, "os.PathLike[str]"]


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_binary(binary: Optional[PathLike] = None, *, cwd: Optional[PathLike] = None) -> Optional[str]:
    """The `larder` binary to run, as an absolute path: `binary`, else
    $LARDER_BINARY, else the one shipped inside this package, else `larder`
    on PATH; None when there is none. A `binary` or $LARDER_BINARY that is
    not an executable file raises `LarderError` (code ``"no_server"``); one
    without a slash is looked up on PATH. Relative paths are taken from
    `cwd` (default: the working directory)."""
    for given, source in ((binary, "the binary given"), (os.environ.get("LARDER_BINARY") or None, "LARDER_BINARY")):
        if given is None:
            continue
        name = os.fspath(given)
        if os.sep not in name:
            found = shutil.which(name)
            if found:
                return os.path.abspath(found)
        else:
            path = os.path.abspath(os.path.join(os.fspath(cwd) if cwd is not None else os.getcwd(),
                                                os.path.expanduser(name)))
            if _executable(path):
                return path
        raise LarderError(0, "no_server", "Larder: %s, %s, is not an executable file" % (source, name))
    if os.path.isfile(SHIPPED_BINARY):
        if not os.access(SHIPPED_BINARY, os.X_OK):
            try:  # an installer that dropped the executable bit
                os.chmod(SHIPPED_BINARY, 0o755)
            except OSError:
                pass
        if os.access(SHIPPED_BINARY, os.X_OK):
            return SHIPPED_BINARY
    found = shutil.which("larder")
    return os.path.abspath(found) if found else None


def start_server(*, binary: Optional[PathLike] = None, fixtures: Optional[PathLike] = None,
                 runner_pid: Optional[int] = None, cwd: Optional[PathLike] = None,
                 settings: Sequence[str] = (), timeout: float = DEFAULT_TIMEOUT) -> str:
    """The URL of this test run's shared server: runs
    ``BINARY up --for PID [--for RUNNER_PID] [--fixtures DIR] [SETTINGS]``
    in `cwd` (default: the working directory), once per process and set of
    arguments, and answers the URL it prints. `larder up` starts the server
    when none runs for this binary, fixtures folder and settings, and keeps
    it while this process (and `runner_pid`, the process that runs a whole
    run's test processes, such as the pytest-xdist controller) lives. One
    that exits non-zero is run again, up to three runs in all (0.2 s, then
    0.5 s later); a failure is not remembered: the next call runs it anew.

    `binary` as `find_binary` says; `fixtures` the fixtures folder (else
    $LARDER_FIXTURES, else the first of fixtures/, tests/fixtures/, ... from
    `cwd` up to the project's top, as `larder up` looks); `settings` more
    `larder serve` settings (``["--ttl-seconds", "600"]``). Raises
    `LarderError` (status 0, code ``"no_server"``) with the one-sentence
    `NO_SERVER` when there is no binary, or with what `larder up` said when
    it fails (its last run; ``details["attempts"]`` says how many runs).
    LARDER_URL is not looked at: see `Client.for_tests`."""
    directory = os.path.abspath(os.fspath(cwd) if cwd is not None else os.getcwd())
    path = find_binary(binary, cwd=directory)
    if path is None:
        raise LarderError(0, "no_server", NO_SERVER)
    command: List[str] = [path, "up", "--for", str(os.getpid())]
    if runner_pid is not None and runner_pid != os.getpid():
        command += ["--for", str(int(runner_pid))]
    if fixtures is not None:
        command += ["--fixtures", os.path.join(directory, os.path.expanduser(os.fspath(fixtures)))]
    command += [str(setting) for setting in settings]
    key = (os.getpid(), directory, *command)
    with _lock:
        url = _started.get(key)
        if url is None:
            url = _started[key] = _run_up(command, directory, timeout)
    return url


def _run_up(command: List[str], cwd: str, timeout: float) -> str:
    shown = " ".join(command)
    attempts = 0
    while True:
        attempts += 1
        try:
            # Its output through pipes: the server it starts is detached from them.
            done = subprocess.run(command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise LarderError(0, "no_server", "Larder: `%s` did not answer in %g s" % (shown, timeout),
                              {"attempts": attempts}) from None
        except OSError as error:
            raise LarderError(0, "no_server", "Larder: could not run `%s`: %s" % (shown, error),
                              {"attempts": attempts}) from None
        said = done.stderr.decode("utf-8", "replace").strip()
        lines = [line.strip() for line in done.stdout.decode("utf-8", "replace").splitlines() if line.strip()]
        if done.returncode == 0 and lines and lines[-1].startswith(("http://", "https://")):
            return lines[-1]
        # Only an exit status says it could not start a server this time; try again a moment later.
        if done.returncode != 0 and attempts <= len(_RETRY_DELAYS):
            _sleep(_RETRY_DELAYS[attempts - 1])
            continue
        why = said or ("it printed %r" % lines[-1] if lines else "it printed nothing")
        raise LarderError(0, "no_server", "Larder: `%s` failed (exit %d): %s" % (shown, done.returncode, why),
                          {"attempts": attempts})


def url_for_tests(url: Optional[str] = None, *, binary: Optional[PathLike] = None,
                  fixtures: Optional[PathLike] = None, runner_pid: Optional[int] = None,
                  cwd: Optional[PathLike] = None) -> str:
    """The server of a test helper: `url`, else $LARDER_URL, else `start_server(...)`."""
    return url or os.environ.get("LARDER_URL") or start_server(binary=binary, fixtures=fixtures,
                                                               runner_pid=runner_pid, cwd=cwd)
