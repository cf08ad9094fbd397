"""The package says it is typed (py.typed): `mypy --strict` passes on its
own code, and code that uses the installed package is checked against its
annotations (a wrong argument is an error, not Any)."""
import os
import subprocess
import sys

import pytest

import larder

pytest.importorskip("mypy", reason="mypy is not installed (it needs Python 3.10 or newer)")

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "larder")

USES = '''
from typing import Dict, List

import larder


def use(client: larder.Client) -> List[str]:
    store: larder.Store = client.create_store(template="gallery", fixtures=["artists"], ttl_seconds=60)
    counts: Dict[str, int] = store.counts("artists")
    url: str = larder.start_server(fixtures="fixtures", runner_pid=1)
    other = larder.Client.for_tests(url)
    label: str = larder.store_label("tests/test_a.py", "TestB::test_c", larder.run_prefix())
    deleted: int = client.delete_stores(label_prefix="run-1/")
    remote = larder.Client("http://10.0.2.2:7464", mode="remote")
    copy: larder.Store = remote.create_store(template="gallery").check_in().check_out()
    changed: bool = copy.changed() or copy.remote
    copy.close()
    return [store.id, str(counts), url, other.url, label, str(deleted), remote.mode, str(changed)]
'''

MISUSES = '''
import larder

larder.Client().create_store(ttl_seconds="a minute")
larder.start_server(runner_pid="1")
larder.Client(mode=True)
'''


def mypy(tmp_path, *targets):
    result = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
                             "--cache-dir", str(tmp_path / "mypy-cache"), *targets],
                            cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    return result.returncode, result.stdout.decode("utf-8", "replace")


def test_the_package_passes_mypy_strict(tmp_path):
    code, output = mypy(tmp_path, SOURCE)
    assert code == 0, output


def test_code_using_the_installed_package_is_checked(tmp_path):
    assert os.path.exists(os.path.join(os.path.dirname(larder.__file__), "py.typed"))
    (tmp_path / "uses.py").write_text(USES)
    (tmp_path / "misuses.py").write_text(MISUSES)
    code, output = mypy(tmp_path, "uses.py")
    assert code == 0, output
    code, output = mypy(tmp_path, "misuses.py")
    assert code == 1, output
    assert 'Argument "ttl_seconds" to "create_store" of "Client" has incompatible type "str"' in output, output
    assert 'Argument "runner_pid" to "start_server" has incompatible type "str"' in output, output
    assert 'Argument "mode" to "Client" has incompatible type "bool"' in output, output
