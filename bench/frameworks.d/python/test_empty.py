"""bench/frameworks, empty: the framework's own cost per test."""
import pytest  # noqa: F401

from benchwrite import write  # noqa: F401  (imported alike by every suite)

# BENCH-REPEAT-BEGIN


def test_NNNN():
    pass
# BENCH-REPEAT-END
