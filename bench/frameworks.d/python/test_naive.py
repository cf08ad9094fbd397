"""bench/frameworks, naive: the template file copied into the test's tmp_path, a row written to the copy."""
import shutil

import pytest  # noqa: F401

from benchwrite import TEMPLATE, write

# BENCH-REPEAT-BEGIN


def test_NNNN(tmp_path):
    path = tmp_path / "store.sqlite"
    shutil.copyfile(TEMPLATE, path)
    write(path)
# BENCH-REPEAT-END
