"""Sample suite for test_plugin.py (run by it in a subprocess, not collected
by the client's own test run): one test that passes, one that fails."""
import contextlib
import sqlite3

import pytest

pytestmark = pytest.mark.larder(template="gallery")


def open_db(path):
    """The SQLite file with Python's own driver: autocommit, closed on leaving `with`."""
    return contextlib.closing(sqlite3.connect(str(path), isolation_level=None))


@pytest.mark.larder(fixtures=["artists"])
def test_passes(larder_store, record):
    record(larder_store, "passes")
    with open_db(larder_store.path) as db:
        assert db.execute("SELECT count(*) FROM artists").fetchone()[0] == 4


@pytest.mark.larder(fixtures=["artists", "artworks"])
def test_fails(larder_store, record):
    record(larder_store, "fails")
    with open_db(larder_store.path) as db:
        db.execute("INSERT INTO artworks (artist_id, title, year) VALUES (3, 'Abaporu', 1928)")
    assert larder_store.counts("artworks") == {"artworks": 12}, "one artwork too many"
