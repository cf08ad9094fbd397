"""What the Python test scripts under Tests/ share: a free loopback port,
and stopping a server as its supervisor would (SIGTERM, then SIGKILL)."""
import signal
import socket
import subprocess


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(process, grace=15):
    """SIGTERM, up to `grace` seconds to finish, then SIGKILL; closes its stdout pipe."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stdout:
        process.stdout.close()
