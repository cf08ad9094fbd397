"""The client against a real server: every call is real HTTP.

App-built templates (`Client.build`, `create_store(build=...)`) are tested
in test_builds.py, the plugin's hook for them in test_plugin.py.
"""
import ast
import contextlib
import json
import os
import pickle
import sqlite3
import threading
import time
import urllib.request
import uuid
import zipfile

import pytest

import larder


def open_db(path):
    """The SQLite file with Python's own driver: autocommit, closed on leaving `with`."""
    return contextlib.closing(sqlite3.connect(str(path), isolation_level=None))


def test_create_from_template_with_fixtures(client):
    store = client.create_store(template="gallery", fixtures=["artists", "artworks"], label="test_create")
    assert store.id.startswith("st_")
    assert store.info["template"] == "gallery"
    assert store.info["version"] == "6"
    assert store.info["label"] == "test_create"
    assert store.info["keep"] is False
    assert store.info["counts"]["artists"] == 4
    assert store.info["counts"]["artworks"] == 12
    # The live file, opened with Python's own SQLite driver.
    with open_db(store.path) as db:
        assert db.execute("SELECT count(*) FROM artworks").fetchone()[0] == 12
        assert db.execute("SELECT name FROM artists WHERE id = 1").fetchone()[0] == "Hilma af Klint"
    store.delete()


def test_a_lone_fixture_name_and_an_empty_store(client):
    store = client.create_store(template="gallery", fixtures="artists")
    assert store.counts(["artists", "artworks"]) == {"artists": 4, "artworks": 0}
    store.delete()
    empty = client.create_store()
    assert empty.info["template"] is None
    assert empty.counts() == {}
    empty.delete()


def test_counts_every_table_or_some(client):
    store = client.create_store(template="gallery", fixtures=["artists", "artworks"])
    counts = store.counts()
    assert set(counts) >= {"artists", "artworks", "albums", "album_artworks", "partners", "artwork_partners"}
    assert counts["artworks"] == 12
    assert store.counts(tables=["artworks"]) == {"artworks": 12}
    assert store.counts(tables="artists") == {"artists": 4}
    with open_db(store.path) as db:
        db.execute("INSERT INTO artists (name) VALUES ('Sonia Delaunay')")
    assert store.counts("artists") == {"artists": 5}
    store.delete()


def test_wait_is_released_by_a_write_made_meanwhile(client):
    store = client.create_store(template="gallery", fixtures=["artists", "artworks"])

    def write():
        time.sleep(0.3)
        with open_db(store.path) as db:
            db.execute("INSERT INTO artworks (artist_id, title, year) VALUES (4, 'Friendship', 1963)")

    writer = threading.Thread(target=write)
    started = time.monotonic()
    writer.start()
    try:
        counts = store.wait("artworks>=13", timeout_ms=10000)
    finally:
        writer.join()
    assert counts["artworks"] == 13
    assert 0.25 <= time.monotonic() - started < 10
    store.delete()


def test_wait_released_by_another_thread_through_the_same_client(client):
    # One client, two threads: each has its own connection.
    store = client.create_store(template="gallery", fixtures=["artists"])

    def write():
        time.sleep(0.3)
        store.load(rows={"albums": [{"title": "Blue"}, {"title": "Grids"}]})

    writer = threading.Thread(target=write)
    writer.start()
    try:
        counts = store.wait(["albums>=2", "artists=4"], timeout_ms=10000)
    finally:
        writer.join()
    assert counts["albums"] == 2
    store.delete()


def test_a_wait_that_cannot_hold_raises_timeout_with_the_last_counts(client):
    store = client.create_store(template="gallery", fixtures=["artists", "artworks"])
    started = time.monotonic()
    with pytest.raises(larder.Timeout) as caught:
        store.wait("artworks>=100", timeout_ms=300)
    assert time.monotonic() - started >= 0.25
    error = caught.value
    assert isinstance(error, larder.LarderError)
    assert error.status == 408
    assert error.code == "timeout"
    assert error.counts["artworks"] == 12
    assert error.details["counts"] == error.counts
    copy = pickle.loads(pickle.dumps(error))  # e.g. from a multiprocessing worker
    assert type(copy) is larder.Timeout and copy.counts == error.counts
    store.delete()


def test_unknown_template_is_an_error_with_its_code(client):
    with pytest.raises(larder.LarderError) as caught:
        client.create_store(template="no_such_template")
    error = caught.value
    assert not isinstance(error, larder.Timeout)
    assert error.status == 404
    assert error.code == "unknown_template"
    assert "no_such_template" in error.message
    assert isinstance(error.details, dict)
    assert error.request_id
    assert str(error).startswith("404 unknown_template: ")
    assert repr(error).startswith("LarderError(status=404, code='unknown_template'")
    assert type(error).__module__ == "larder"


def test_other_errors(client):
    with pytest.raises(larder.LarderError) as caught:
        client.store("st_nothere")
    assert (caught.value.status, caught.value.code) == (404, "store_not_found")
    with pytest.raises(larder.LarderError) as caught:
        client.create_store(template="gallery", fixtures=["no_such_fixture"])
    assert (caught.value.status, caught.value.code) == (404, "unknown_fixture")
    with pytest.raises(larder.LarderError) as caught:
        client.create_store(fixtures=["artists"])  # fixtures need a template
    assert (caught.value.status, caught.value.code) == (400, "bad_request")
    store = client.create_store(template="gallery")
    with pytest.raises(larder.LarderError) as caught:
        store.query("ATTACH DATABASE '/tmp/elsewhere.sqlite' AS elsewhere")
    assert (caught.value.status, caught.value.code) == (403, "forbidden_sql")
    with pytest.raises(larder.LarderError) as caught:
        store.query("SELECT * FROM no_such_table")
    assert (caught.value.status, caught.value.code) == (422, "sql_error")
    assert caught.value.details
    store.delete()


def test_reset_in_place_under_an_open_connection_that_then_writes(client):
    store = client.create_store(template="gallery", fixtures=["artists", "artworks"])
    path, inode = store.path, os.stat(store.path).st_ino
    # This process's own connection stays open across the reset.
    with open_db(path) as db:
        db.execute("DELETE FROM artworks")
        db.execute("INSERT INTO artists (name) VALUES ('Sonia Delaunay')")
        store.load(fixtures=["albums"])
        assert store.reset() is store
        assert store.info["fixtures"] == ["artists", "artworks"]
        assert store.info["counts"]["artworks"] == 12
        assert store.info["counts"]["albums"] == 0
        assert store.path == path and os.stat(path).st_ino == inode
        assert db.execute("SELECT count(*) FROM artworks").fetchone()[0] == 12
        db.execute("INSERT INTO artists (name) VALUES ('after the reset')")
    assert store.counts("artists") == {"artists": 5}
    store.delete()


def test_reset_waits_for_a_write_transaction_then_conflicts(client):
    store = client.create_store(template="gallery", fixtures=["artists", "artworks"])
    with open_db(store.path) as db:
        db.execute("BEGIN IMMEDIATE")
        db.execute("DELETE FROM artworks")
        with pytest.raises(larder.LarderError) as caught:
            store.reset()
        assert (caught.value.status, caught.value.code, caught.value.retry_after) == (409, "conflict", 1)
        db.execute("COMMIT")
        assert store.reset().info["counts"]["artworks"] == 12
        assert db.execute("SELECT count(*) FROM artworks").fetchone()[0] == 12
    store.delete()


def test_reset_of_an_upload(client, tmp_path):
    upload = tmp_path / "app.sqlite"
    with open_db(upload) as db:
        db.execute("CREATE TABLE notes (body TEXT)")
        db.execute("INSERT INTO notes VALUES ('kept')")
    request = urllib.request.Request(client.url + "/stores", data=upload.read_bytes(), method="POST",
                                     headers={"Content-Type": "application/vnd.sqlite3"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        store = client.store(json.loads(answer.read())["id"])
    with open_db(store.path) as db:
        db.execute("DELETE FROM notes")
        db.execute("CREATE TABLE more (x)")
        store.reset()
        assert db.execute("SELECT body FROM notes").fetchall() == [("kept",)]
        assert db.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'more'").fetchone()[0] == 0
    store.delete()


def test_fork_is_the_committed_state_then_its_fixtures(client):
    source = client.create_store(template="gallery", fixtures=["artists", "artworks"], label="expensive setup")
    with open_db(source.path) as db:
        db.execute("INSERT INTO artists (name) VALUES ('committed')")
        # The source's test is writing: what it has not committed stays out of the fork.
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO artists (name) VALUES ('not committed')")
        fork = client.create_store(from_store=source, fixtures=["albums"], label="forked")
        db.execute("COMMIT")
    assert fork.id != source.id
    assert (fork.info["template"], fork.info["version"], fork.info["label"]) == ("gallery", "6", "forked")
    assert fork.info["fixtures"] == ["artists", "artworks", "albums"]
    assert fork.info["counts"]["artists"] == 5
    assert fork.info["counts"]["albums"] > 0
    assert source.counts("artists") == {"artists": 6}
    # The fork's base is the fork as it was made, its fixtures included.
    assert fork.diff()["tables"] == {}
    # A reset of the fork goes back to the fork as it was made.
    with open_db(fork.path) as db:
        db.execute("DELETE FROM artists WHERE id > 1")
    assert fork.reset().info["counts"]["artists"] == 5
    fork.delete()
    source.delete()


def test_fork_errors(client):
    source = client.create_store(template="gallery")
    with pytest.raises(larder.LarderError) as caught:
        client.create_store(from_store=source, template="gallery")
    assert (caught.value.status, caught.value.code) == (400, "bad_request")
    with pytest.raises(larder.LarderError) as caught:
        client.create_store(from_store="st_nothere")
    assert (caught.value.status, caught.value.code) == (404, "store_not_found")
    gone = client.create_store()
    gone.delete()
    with pytest.raises(larder.LarderError) as caught:
        gone.reset()
    assert (caught.value.status, caught.value.code) == (404, "store_not_found")
    source.delete()


def test_diff_reports_inserts_updates_and_deletes_by_key(client):
    store = client.create_store(template="gallery", fixtures=["artists"])
    unchanged = store.diff()
    assert "gallery" in unchanged["base"]
    assert unchanged["schema"] == {"added": [], "removed": [], "changed": []}
    assert unchanged["tables"] == {}
    with open_db(store.path) as db:
        db.execute("INSERT INTO artists (id, name, born) VALUES (100, 'Sonia Delaunay', 1885)")
        db.execute("UPDATE artists SET born = 1863 WHERE id = 1")
        db.execute("DELETE FROM artists WHERE id = 4")
        db.execute("INSERT INTO albums (id, title, created_at) VALUES (7, 'Blue', '2024-06-01T00:00:00Z')")
    diff = store.diff()
    assert diff["schema"] == {"added": [], "removed": [], "changed": []}
    assert sorted(diff["tables"]) == ["albums", "artists"]  # unchanged tables are left out
    artists = diff["tables"]["artists"]
    assert (artists["inserted"], artists["updated"], artists["deleted"], artists["truncated"]) == (1, 1, 1, False)
    rows = {row["op"]: row for row in artists["rows"]}
    assert len(rows) == len(artists["rows"]) == 3
    assert rows["insert"] == {"op": "insert", "key": {"id": 100}, "old": None,
                              "new": {"id": 100, "name": "Sonia Delaunay", "born": 1885, "country": ""}}
    assert rows["update"] == {"op": "update", "key": {"id": 1},
                              "old": {"id": 1, "name": "Hilma af Klint", "born": 1862, "country": ""},
                              "new": {"id": 1, "name": "Hilma af Klint", "born": 1863, "country": ""}}
    assert rows["delete"] == {"op": "delete", "key": {"id": 4},
                              "old": {"id": 4, "name": "Agnes Martin", "born": 1912, "country": ""}, "new": None}
    assert diff["tables"]["albums"]["rows"] == [
        {"op": "insert", "key": {"id": 7}, "old": None,
         "new": {"id": 7, "title": "Blue", "created_at": "2024-06-01T00:00:00Z"}}]

    # limit cuts the rows listed, not the counts.
    one = store.diff(limit=1)["tables"]
    assert len(one["artists"]["rows"]) == 1 and one["artists"]["truncated"] is True
    assert (one["artists"]["inserted"], one["artists"]["updated"], one["artists"]["deleted"]) == (1, 1, 1)
    assert len(one["albums"]["rows"]) == 1 and one["albums"]["truncated"] is False
    counts_only = store.diff(limit=0)["tables"]
    assert counts_only["artists"]["rows"] == [] and counts_only["artists"]["deleted"] == 1
    # tables narrows: a list or one name.
    assert list(store.diff(tables=["albums"])["tables"]) == ["albums"]
    narrowed = store.diff(tables="artists", limit=2)["tables"]
    assert list(narrowed) == ["artists"] and len(narrowed["artists"]["rows"]) == 2
    assert store.diff(tables=["partners"])["tables"] == {}  # a table without changes

    # After a reset nothing has changed.
    store.reset()
    assert store.diff()["tables"] == {}
    store.delete()


def test_diff_of_blobs_and_schema_changes(client):
    store = client.create_store(template="gallery", fixtures=["artists"])
    with open_db(store.path) as db:
        db.execute("UPDATE artists SET name = ? WHERE id = 2", (b"\x00\xff\x10",))
        db.execute("ALTER TABLE artists ADD COLUMN photo BLOB")
        db.execute("CREATE TABLE notes (body TEXT)")
        db.execute("DROP TABLE artwork_partners")
    diff = store.diff(tables=["artists"])
    (row,) = diff["tables"]["artists"]["rows"]
    assert (row["op"], row["key"]) == ("update", {"id": 2})
    assert row["old"]["name"] == "Katsushika Hokusai"
    assert row["new"]["name"] == {"base64": "AP8Q"}
    schema = diff["schema"]
    assert sorted((item["type"], item["name"], item.get("table")) for item in schema["added"]) == [
        ("column", "photo", "artists"), ("table", "notes", None)]
    column = next(item for item in schema["added"] if item["type"] == "column")
    assert column["new"]["type"] == "BLOB"
    assert [(item["type"], item["name"]) for item in schema["removed"]] == [("table", "artwork_partners")]
    assert schema["removed"][0]["old"]["name"] == "artwork_partners"
    assert schema["changed"] == []
    store.delete()


def test_diff_errors(client):
    store = client.create_store(template="gallery", fixtures=["artists"])
    with pytest.raises(larder.LarderError) as caught:
        store.diff(tables=["artists", "no_such_table"])
    assert (caught.value.status, caught.value.code) == (400, "bad_request")
    assert "no_such_table" in caught.value.message
    for limit in (-1, 10001):
        with pytest.raises(larder.LarderError) as caught:
            store.diff(limit=limit)
        assert (caught.value.status, caught.value.code) == (400, "bad_request")
    store.delete()
    with pytest.raises(larder.LarderError) as caught:
        store.diff()
    assert (caught.value.status, caught.value.code) == (404, "store_not_found")


def test_query_with_params(client):
    store = client.create_store(template="gallery", fixtures=["artists", "artworks"])
    answer = store.query("SELECT id, name FROM artists WHERE born < ? ORDER BY id", [1870])
    assert answer["columns"] == ["id", "name"]
    assert answer["rows"] == [[1, "Hilma af Klint"], [2, "Katsushika Hokusai"]]
    changed = store.query("UPDATE artists SET born = :born WHERE id = :id", {"born": 1900, "id": 1})
    assert changed["changes"] == 1
    assert store.query("SELECT born FROM artists WHERE id = 1")["rows"] == [[1900]]
    store.delete()


def test_load_fixtures_rows_or_sql(client):
    store = client.create_store(template="gallery")
    answer = store.load(fixtures=["artists"])
    assert answer["loaded"] == ["artists"]
    assert answer["counts"]["artists"] == 4
    answer = store.load(rows={"artworks": [{"artist_id": 1, "title": "Svanen", "year": 1915}]})
    assert answer["counts"]["artworks"] == 1
    answer = store.load(sql="INSERT INTO albums (title) VALUES ('A'); INSERT INTO albums (title) VALUES ('B');")
    assert answer["counts"]["albums"] == 2
    with pytest.raises(larder.LarderError) as caught:
        store.load()  # one of the three is needed
    assert caught.value.code == "bad_request"
    store.delete()


def test_migrate_from_an_older_version(client):
    store = client.create_store(template="gallery", version="3", fixtures=["artists"])
    assert store.info["version"] == "3"
    assert "partners" not in store.counts()
    answer = store.migrate()
    assert (answer["from"], answer["to"]) == ("3", "6")
    assert [m["version"] for m in answer["applied"]] == ["4", "5", "6"]
    assert store.info["version"] == "6"
    assert store.refresh().info["version"] == "6"
    assert store.counts()["partners"] == 0
    store.delete()


def test_store_from_a_snapshot(client):
    store = client.create_store(template="gallery", snapshot="v3")
    assert store.info["version"] == "6"
    assert store.counts(["artists", "artworks"]) == {"artists": 4, "artworks": 12}
    store.delete()


def test_a_snapshot_kept_as_it_was_saved(client):
    # version=None sends "version": null: the snapshot is not migrated.
    store = client.create_store(template="gallery", snapshot="v3", version=None)
    assert store.info["version"] == "3"
    assert store.migrations()["version"] == "3"
    store.delete()
    assert client.create_store(template="gallery", version="2").info["version"] == "2"


def test_artifact_is_streamed_to_a_zip_file(client, tmp_path):
    store = client.create_store(template="gallery", fixtures=["artists", "artworks"], label="artifact")
    with open_db(store.path) as db:
        db.execute("INSERT INTO artists (name) VALUES ('Leonora Carrington')")
    target = tmp_path / "sub" / "dir" / "store.zip"
    assert store.artifact(target) == str(target)
    with zipfile.ZipFile(target) as archive:
        names = archive.namelist()
        assert "store.sqlite" in names and "manifest.json" in names
        # Its creation state too: `larder open` shows what the test changed.
        assert "base.sqlite" in names
        manifest = json.loads(archive.read("manifest.json"))
        archive.extract("store.sqlite", tmp_path)
    assert manifest["id"] == store.id
    assert manifest["label"] == "artifact"
    with open_db(tmp_path / "store.sqlite") as db:
        assert db.execute("SELECT count(*) FROM artists").fetchone()[0] == 5
    assert [p.name for p in target.parent.iterdir()] == ["store.zip"]  # no partial file left
    # The same connection goes on after a download.
    assert store.counts("artists") == {"artists": 5}
    store.delete()
    with pytest.raises(larder.LarderError) as caught:
        store.artifact(tmp_path / "gone.zip")
    assert caught.value.code == "store_not_found"
    assert not (tmp_path / "gone.zip").exists()


def test_keep_then_delete(client):
    store = client.create_store(template="gallery", label="kept")
    assert store.keep() is store
    assert store.info["keep"] is True
    assert client.store(store.id).info["keep"] is True
    store.delete()
    with pytest.raises(larder.LarderError) as caught:
        client.store(store.id)
    assert caught.value.code == "store_not_found"
    with pytest.raises(larder.LarderError) as caught:
        store.delete()
    assert caught.value.status == 404


def test_delete_stores_by_label_or_prefix(client):
    run = "run-" + uuid.uuid4().hex[:8]
    this_run = [client.create_store(label="%s/tests/test_%s.py/test_a" % (run, n)) for n in (1, 2)]
    this_run[0].keep()
    # Another run whose name starts with this one's; a label that is the prefix without its slash.
    others = [client.create_store(label=run + "0/tests/test_1.py/test_a").keep(),
              client.create_store(label=run).keep()]
    assert client.delete_stores(label_prefix=run + "/") == 2  # the kept one too
    for store in this_run:
        with pytest.raises(larder.LarderError) as caught:
            client.store(store.id)
        assert caught.value.code == "store_not_found"
    assert [client.store(store.id).id for store in others] == [store.id for store in others]
    # One label exactly.
    assert client.delete_stores(label=run) == 1
    assert client.delete_stores(label=run) == 0
    assert client.delete_stores(label_prefix=run) == 1
    with pytest.raises(ValueError):
        client.delete_stores()
    with pytest.raises(ValueError):
        client.delete_stores(label_prefix="")


def test_a_store_as_a_context_manager_is_deleted_on_leaving(client):
    with client.create_store(template="gallery") as store:
        assert store.counts("artists") == {"artists": 0}
    with pytest.raises(larder.LarderError):
        client.store(store.id)


def test_schema_and_migrations(client):
    store = client.create_store(template="gallery", version="5")
    assert "artists" in [t["name"] for t in store.schema()["tables"]]
    migrations = store.migrations()
    assert migrations["version"] == "5"
    assert [m["state"] for m in migrations["migrations"]][-1] == "pending"
    store.delete()


def test_url_from_the_environment(server, monkeypatch):
    monkeypatch.setenv("LARDER_URL", server.url + "/")
    with larder.Client() as client:
        assert client.url == server.url
        assert client.health()["status"] == "ok"
    monkeypatch.delenv("LARDER_URL")
    assert larder.Client().url == "http://127.0.0.1:7464"


def test_an_unreachable_server(tmp_path):
    client = larder.Client(url="http://127.0.0.1:9")
    with pytest.raises(larder.LarderError) as caught:
        client.create_store()
    assert caught.value.status == 0
    assert caught.value.code == "unreachable"
    with pytest.raises(ValueError):
        larder.Client(url="ftp://example.org")


def test_sources_are_python_3_9():
    package = os.path.dirname(larder.__file__)
    for name in sorted(os.listdir(package)):
        if name.endswith(".py"):
            with open(os.path.join(package, name), encoding="utf-8") as f:
                ast.parse(f.read(), filename=name, feature_version=(3, 9))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_process_opens_its_own_connection(client):
    store = client.create_store(template="gallery", fixtures=["artists"])
    parent_socket = client._local.connection.sock
    pid = os.fork()
    if pid == 0:  # the child: the same client, on a connection of its own
        try:
            ok = store.counts("artists") == {"artists": 4} and client._local.connection.sock is not parent_socket
        except BaseException:
            ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert store.counts("artists") == {"artists": 4}
    assert client._local.connection.sock is parent_socket
    client.close()
    assert store.counts("artists") == {"artists": 4}  # a new connection after close()
    store.delete()
