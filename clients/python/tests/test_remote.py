"""Remote mode (issue 47) against a server whose files this process cannot
see (`hidden_server`: Tests/support/hidden-larder), so every store's
`path` here is the client's local copy and nothing else would do: a store
is downloaded when made, written with Python's sqlite3, checked in with
PUT /stores/{id}/database (the file alone, or a zip of it and its -wal),
and downloaded again after a change made on the server's side. Which mode
a client takes, from its option, $LARDER_MODE or its URL, needs no server.

The pytest plugin in remote mode is tested in test_plugin.py, snapshot
checks in remote mode in test_snapshot_checks.py.
"""
import contextlib
import os
import shutil
import sqlite3
import stat

import pytest

import larder


def open_db(path):
    """The SQLite file with Python's own driver: autocommit, closed on leaving `with`."""
    return contextlib.closing(sqlite3.connect(str(path), isolation_level=None))


def scalar(path, sql):
    with open_db(path) as db:
        return db.execute(sql).fetchone()[0]


@pytest.fixture
def remote(hidden_server):
    with larder.Client(url=hidden_server.url, mode="remote") as client:
        yield client


# --- the mode ------------------------------------------------------------------------


@pytest.mark.parametrize("url, mode", [
    ("http://127.0.0.1:7464", "local"),
    ("http://127.8.9.10:7464", "local"),
    ("http://localhost:7464", "local"),
    ("http://LocalHost", "local"),
    ("http://[::1]:7464/prefix", "local"),
    ("https://larder.ci.example", "remote"),
    ("http://10.0.2.2:7464", "remote"),  # the Android emulator's way to its host
    ("http://128.0.0.1:7464", "remote"),
    ("http://[fe80::1]:7464", "remote"),
])
def test_the_mode_follows_the_url_unless_told(monkeypatch, url, mode):
    monkeypatch.delenv("LARDER_MODE", raising=False)
    client = larder.Client(url=url)
    assert client.mode == mode
    assert client.remote is (mode == "remote")
    other = "local" if mode == "remote" else "remote"
    monkeypatch.setenv("LARDER_MODE", "")  # empty: as unset
    assert larder.Client(url=url).mode == mode
    monkeypatch.setenv("LARDER_MODE", other)
    assert larder.Client(url=url).mode == other
    # The constructor's option beats the environment.
    assert larder.Client(url=url, mode=mode).mode == mode


def test_a_mode_that_is_neither_is_an_error(monkeypatch):
    for value in ("Remote", "hidden", " local"):
        monkeypatch.setenv("LARDER_MODE", value)
        with pytest.raises(ValueError) as caught:
            larder.Client(url="http://127.0.0.1:7464")
        message = str(caught.value)
        assert "LARDER_MODE" in message and repr(value) in message, message
        assert "'remote'" in message and "'local'" in message, message
        # No server is started for a client that could not be made.
        with pytest.raises(ValueError, match="LARDER_MODE"):
            larder.Client.for_tests(binary="/nonexistent/larder")
    monkeypatch.delenv("LARDER_MODE")
    with pytest.raises(ValueError, match="'remote' or 'local', not 'sideways'"):
        larder.Client(url="http://127.0.0.1:7464", mode="sideways")


def test_local_mode_has_nothing_to_hand_back(client):
    assert client.mode == "local"
    with client.create_store(template="gallery") as store:
        assert store.remote is False
        assert store.path == store.info["path"] and os.path.exists(store.path)
        assert store.check_in() is store and store.check_out() is store
        assert store.changed() is False
        store.close()
        assert os.path.exists(store.path)


# --- the local copy --------------------------------------------------------------------


def test_a_store_is_a_local_copy_handed_back_by_check_in(remote):
    store = remote.create_store(template="gallery", fixtures=["artists"], label="remote-check-in")
    assert store.remote is True
    # The server's path is the server's: not here.
    assert not os.path.exists(store.info["path"])
    folder = os.path.dirname(store.path)
    assert os.path.basename(folder).startswith("larder-remote-") and os.path.basename(store.path) == "store.sqlite"
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert scalar(store.path, "SELECT count(*) FROM artists") == 4
    assert store.changed() is False

    with open_db(store.path) as db:
        db.execute("INSERT INTO artworks (artist_id, title, year) VALUES (3, 'Abaporu', 1928)")
        db.execute("UPDATE artists SET name = 'Tarsila' WHERE id = 3")
    assert store.changed() is True
    # The server sees what was last checked in: nothing yet.
    assert store.counts("artworks") == {"artworks": 0}
    assert store.diff()["tables"] == {}

    assert store.check_in() is store
    assert store.changed() is False
    assert store.info["id"] == store.id and store.info["label"] == "remote-check-in"
    assert store.counts(["artists", "artworks"]) == {"artists": 4, "artworks": 1}
    tables = store.diff()["tables"]
    assert (tables["artworks"]["inserted"], tables["artists"]["updated"]) == (1, 1), tables
    assert tables["artworks"]["rows"][0]["new"]["title"] == "Abaporu"

    # close() removes the copy; the store stays, and `path` downloads it again.
    store.close()
    assert not os.path.exists(folder)
    assert scalar(store.path, "SELECT title FROM artworks") == "Abaporu"
    again = os.path.dirname(store.path)
    assert again != folder
    store.delete()
    assert not os.path.exists(again)
    with pytest.raises(larder.LarderError) as caught:
        remote.store(store.id)
    assert caught.value.code == "store_not_found"


def test_a_copy_with_its_wal_goes_as_a_zip(remote, tmp_path):
    with remote.create_store(template="gallery", fixtures=["artists"]) as store:
        local = store.path
        # Rows committed to the WAL and not to the database: the copy as a
        # crashed (or still running) writer leaves it. The files are copied
        # while the writer holds them open, so its closing checkpoint does
        # not reach them.
        side = tmp_path / "side"
        side.mkdir()
        with open_db(local) as db:
            assert db.execute("PRAGMA journal_mode = WAL").fetchone() == ("wal",)
            db.execute("PRAGMA wal_autocheckpoint = 0")
            db.executemany("INSERT INTO artworks (artist_id, title, year) VALUES (1, ?, 1907)",
                           [("The Ten Largest, No. %d" % n,) for n in (1, 2, 3)])
            for suffix in ("", "-wal"):
                shutil.copyfile(local + suffix, str(side / ("store.sqlite" + suffix)))
        for suffix in ("", "-wal"):
            shutil.copyfile(str(side / ("store.sqlite" + suffix)), local + suffix)
        if os.path.exists(local + "-shm"):
            os.unlink(local + "-shm")
        assert os.path.getsize(local + "-wal") > 0
        # The database alone does not have them.
        alone = tmp_path / "alone"
        alone.mkdir()
        shutil.copyfile(str(side / "store.sqlite"), str(alone / "store.sqlite"))
        assert scalar(alone / "store.sqlite", "SELECT count(*) FROM artworks") == 0

        store.check_in()
        assert store.counts("artworks") == {"artworks": 3}
        assert store.diff()["tables"]["artworks"]["inserted"] == 3
        assert os.path.getsize(local + "-wal") > 0  # the copy is left as it was
        assert scalar(local, "SELECT count(*) FROM artworks") == 3


def test_a_copy_the_server_refuses_leaves_the_store_as_it_was(remote):
    with remote.create_store(template="gallery", fixtures=["artists"]) as store:
        with open_db(store.path) as db:
            db.execute("DELETE FROM artists")
        with open(store.path, "r+b") as file:
            file.write(b"this is no longer a SQLite database")
        with pytest.raises(larder.LarderError) as caught:
            store.check_in()
        assert caught.value.status in (400, 415, 422), caught.value
        assert store.changed() is True  # not taken: still to hand back
        assert store.counts("artists") == {"artists": 4}
        store.check_out()  # the store over the broken copy
        assert scalar(store.path, "SELECT count(*) FROM artists") == 4
        assert store.changed() is False


def test_server_side_changes_refresh_the_local_copy(remote):
    with remote.create_store(template="gallery", fixtures=["artists"], version="5") as store:
        local = store.path

        def inode():
            return os.stat(local).st_ino

        # migrate: the local copy's changes go first, then the copy follows.
        with open_db(local) as db:
            db.execute("INSERT INTO artists (name) VALUES ('Sonia Delaunay')")
        assert scalar(local, "SELECT count(*) FROM sqlite_schema WHERE name = 'artist_artwork_counts'") == 0
        assert store.migrate()["to"] == "6"
        assert store.info["version"] == "6"
        assert scalar(local, "SELECT count(*) FROM sqlite_schema WHERE name = 'artist_artwork_counts'") == 1
        assert scalar(local, "SELECT count(*) FROM artists") == 5

        # load: likewise.
        with open_db(local) as db:
            db.execute("INSERT INTO artists (name) VALUES ('Lygia Clark')")
        loaded = store.load(fixtures=["artworks"])
        assert loaded["counts"]["artists"] == 6
        assert scalar(local, "SELECT count(*) FROM artworks") == 12
        assert scalar(local, "SELECT count(*) FROM artists") == 6

        # A query that changes rows: the copy follows; one that reads does not
        # download it again, and sees the copy's own last write (checked in first).
        before = inode()
        assert store.query("UPDATE artworks SET year = 1000 WHERE id = 1")["changes"] == 1
        assert scalar(local, "SELECT year FROM artworks WHERE id = 1") == 1000
        assert inode() != before
        with open_db(local) as db:
            db.execute("DELETE FROM artworks WHERE id = 2")
        before = inode()
        assert store.query("SELECT count(*) FROM artworks")["rows"] == [[11]]
        assert inode() == before
        assert store.changed() is False

        # reset: back to how it was made, here too (what was not checked in goes with it).
        with open_db(local) as db:
            db.execute("DELETE FROM artists WHERE name = 'Lygia Clark'")
        store.reset()
        assert store.changed() is False
        assert scalar(local, "SELECT count(*) FROM artists") == 4
        assert scalar(local, "SELECT count(*) FROM artworks") == 0
        assert store.diff()["tables"] == {}
        assert not os.path.exists(local + "-wal")


def test_a_store_looked_up_is_downloaded_when_its_path_is_asked_for(remote):
    made = remote.create_store(template="gallery", fixtures=["artists"])
    found = remote.store(made.id)
    assert found.remote is True and found.changed() is False
    assert "no local copy" in repr(found)
    found.check_in()  # nothing to hand back yet
    assert scalar(found.path, "SELECT count(*) FROM artists") == 4
    assert os.path.dirname(found.path) != os.path.dirname(made.path)
    found.close()
    made.delete()


def test_a_build_this_client_would_make_is_handed_back(remote):
    """The migrator would write the server's file: refused, and the claim
    handed back so that a client on the server's machine may build it."""
    ran = []
    with pytest.raises(larder.LarderError) as raised:
        remote.build("remote-build-refused", ran.append)
    assert raised.value.code == "remote_mode"
    assert ran == []
    assert all(b["key"] != "remote-build-refused" for b in remote.builds())
