"""Snapshot checks against a real server, with real migrators: an old
database kept as a file is uploaded as it is, migrated by the application's
own migrator (Django's `manage.py migrate` in a subprocess, Alembic through
its API, or Python's sqlite3 standing in for one), then judged by
POST /stores/{id}/check against a build the same migrator made.

The Django and Alembic projects are written into temporary directories by
the tests: a notes app whose 0001 makes the table and 0002 adds a column
with an index, and "bad" variants of 0002 (one loses a column that holds
data, one leaves an index behind).
"""
import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
import uuid
import xml.etree.ElementTree as ElementTree
import zipfile

import pytest

import larder
from larder.pytest_plugin import file_safe


def open_db(path):
    """The SQLite file with Python's own driver: autocommit, closed on leaving `with`."""
    return contextlib.closing(sqlite3.connect(str(path), isolation_level=None))


def unique(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:12])


def fingerprint(directory):
    """A build key's digest: every file under `directory`, names and contents."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(str(directory)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, str(directory)).encode())
            with open(path, "rb") as file:
                digest.update(file.read())
    return digest.hexdigest()[:24]


def columns(path, table):
    with open_db(path) as db:
        return [row[1] for row in db.execute('PRAGMA table_info("%s")' % table)]


def stores_labelled(client, label):
    return client._call("GET", "/stores", query={"label": label})["stores"]


@pytest.fixture(scope="module")
def module_client(server):
    with larder.Client(url=server.url) as c:
        yield c


# --- Django ------------------------------------------------------------------------

DJANGO_FILES = {
    "manage.py": '''
        import os
        import sys

        if __name__ == "__main__":
            os.environ.setdefault("DJANGO_SETTINGS_MODULE", "notesite.settings")
            from django.core.management import execute_from_command_line
            execute_from_command_line(sys.argv)
        ''',
    "notesite/__init__.py": "",
    "notesite/settings.py": '''
        import os

        SECRET_KEY = "not a secret"
        INSTALLED_APPS = ["notes"]
        # The database the migrator works on comes from the environment.
        DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["APP_DATABASE"]}}
        USE_TZ = True
        DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
        ''',
    "notes/__init__.py": "",
    "notes/migrations/__init__.py": "",
    "notes/migrations/0001_initial.py": '''
        from django.db import migrations, models


        class Migration(migrations.Migration):
            initial = True
            dependencies = []
            operations = [
                migrations.CreateModel(name="Note", fields=[
                    ("id", models.BigAutoField(primary_key=True, serialize=False)),
                    ("title", models.CharField(max_length=100)),
                    ("body", models.TextField(default="")),
                    ("tag", models.CharField(max_length=20, null=True)),
                    ("created", models.DateTimeField()),
                ]),
            ]
        ''',
}

DJANGO_0002_GOOD = '''
    from django.db import migrations, models


    class Migration(migrations.Migration):
        dependencies = [("notes", "0001_initial")]
        operations = [
            migrations.AddField("note", "pinned", models.BooleanField(default=False, db_index=True)),
        ]
    '''

# The tag field is gone, and the tags with it.
DJANGO_0002_LOSSY = '''
    from django.db import migrations, models


    class Migration(migrations.Migration):
        dependencies = [("notes", "0001_initial")]
        operations = [
            migrations.RemoveField("note", "tag"),
            migrations.AddField("note", "pinned", models.BooleanField(default=False, db_index=True)),
        ]
    '''


class DjangoProject:
    """A Django project in `directory`; `migrate(path)` is the app's own
    migrator on that SQLite file: `manage.py migrate` in a subprocess."""

    def __init__(self, directory, migration_0002):
        self.directory = directory
        files = dict(DJANGO_FILES, **{"notes/migrations/0002_note_pinned.py": migration_0002})
        for name, text in files.items():
            path = directory / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text).lstrip())
        self.key = "django-" + fingerprint(directory)

    def migrate(self, path, *target):
        environment = dict(os.environ, APP_DATABASE=str(path))
        result = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0", *target],
                                cwd=str(self.directory), env=environment, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, timeout=60)
        if result.returncode != 0:
            raise RuntimeError("manage.py migrate failed:\n" + result.stdout.decode("utf-8", "replace"))


@pytest.fixture(scope="module")
def django_good(tmp_path_factory):
    return DjangoProject(tmp_path_factory.mktemp("django-good"), DJANGO_0002_GOOD)


@pytest.fixture(scope="module")
def django_lossy(tmp_path_factory):
    return DjangoProject(tmp_path_factory.mktemp("django-lossy"), DJANGO_0002_LOSSY)


@pytest.fixture(scope="module")
def django_v1(django_good, tmp_path_factory):
    """The old database the team keeps: migrated to 0001 by the released app, with its notes."""
    path = tmp_path_factory.mktemp("django-snapshots") / "v1.sqlite"
    django_good.migrate(path, "notes", "0001_initial")
    with open_db(path) as db:
        db.executemany('INSERT INTO notes_note (title, body, tag, created) VALUES (?, ?, ?, ?)',
                       [("Groceries", "milk", "home", "2024-06-13 08:00:00"),
                        ("Standup", "", "work", "2024-06-13 09:30:00"),
                        ("Idea", "a larder of stores", None, "2024-06-14 21:12:00")])
    return path


def test_django_correct_migration_passes(module_client, django_good, django_v1):
    client = module_client
    # The reference: a build the same migrator makes on an empty file, once per key.
    key = client.build(django_good.key, django_good.migrate)
    assert client.build(key, django_good.migrate) == key  # cached: ready at once
    label = unique("django-pass")
    result = client.check_snapshot(django_v1, migrate=django_good.migrate, build=key, label=label, expect={
        "before": ["SELECT count(*) = 3 FROM notes_note", "SELECT count(tag) = 2 FROM notes_note"],
        "counts": {"notes_note": 3},
        "assert": ["SELECT count(*) = 3 FROM notes_note WHERE pinned = 0",
                   "SELECT tag = 'home' FROM notes_note WHERE title = 'Groceries'"]})
    assert result["passed"] is True, result
    assert result["failures"] == []
    assert (result["kind"], result["snapshot"], result["template"]) == ("app", "v1.sqlite", None)
    # django_migrations is bookkeeping: its rows (applied at other times than
    # the build's) are not compared, and it gives no one version (apps number
    # their migrations apart).
    assert (result["from_version"], result["to_version"]) == (None, None)
    assert (result["against"], result["kept_store"]) == ({"build": key}, None)
    assert isinstance(result["ms"], (int, float))
    assert larder.assert_passed(result) is result
    assert stores_labelled(client, label) == []  # passed: deleted


def test_django_migration_losing_a_column_with_data_fails_naming_it(module_client, django_lossy, django_v1):
    client = module_client
    # The lossy 0002 builds a reference of its own: the schemas agree, the data does not.
    key = client.build(django_lossy.key, django_lossy.migrate)
    result = client.check_snapshot(django_v1, migrate=django_lossy.migrate, build=key)
    assert result["passed"] is False
    assert result["failures"] == ["notes_note.tag held 2 non-NULL values; the migrated store has no column tag"], result

    # Kept, with what the migrator made of it, to download.
    kept = client.store(result["kept_store"])
    assert kept.info["keep"] is True
    assert kept.info["label"] == "v1.sqlite"
    downloaded = kept.database(django_v1.parent / "kept.sqlite")
    assert "tag" not in columns(downloaded, "notes_note") and "pinned" in columns(downloaded, "notes_note")

    with pytest.raises(larder.SnapshotCheckFailed) as caught:
        larder.assert_passed(result)
    assert isinstance(caught.value, AssertionError)
    assert caught.value.result is result
    lines = str(caught.value).splitlines()
    assert lines[0] == "snapshot v1.sqlite failed its check against build %s: 1 failure" % key
    assert lines[1] == "  - notes_note.tag held 2 non-NULL values; the migrated store has no column tag"
    assert kept.id in lines[2]
    kept.delete()

    # Declared as dropped on purpose, it passes.
    result = client.check_snapshot(django_v1, migrate=django_lossy.migrate, build=key,
                                   expect={"drops": ["notes_note.tag"]})
    assert result["passed"] is True, result


def test_django_false_before_fails_naming_it(module_client, django_good, django_v1, tmp_path):
    client = module_client
    key = client.build(django_good.key, django_good.migrate)
    # The expectations beside the snapshot are read: v1.expect.json.
    snapshot = tmp_path / "v1.sqlite"
    shutil.copyfile(str(django_v1), str(snapshot))
    (tmp_path / "v1.expect.json").write_text(json.dumps(
        {"before": ["SELECT count(*) = 5 FROM notes_note"], "counts": {"notes_note": 3}}))
    result = client.check_snapshot(snapshot, migrate=django_good.migrate, build=key)
    assert result["passed"] is False
    assert result["failures"] == ["before is false (got 0): SELECT count(*) = 5 FROM notes_note"], result
    client.store(result["kept_store"]).delete()
    # expect={} leaves the file aside.
    assert client.check_snapshot(snapshot, migrate=django_good.migrate, build=key, expect={})["passed"] is True


# --- Alembic -----------------------------------------------------------------------

ALEMBIC_INI = '''
    [alembic]
    script_location = %(here)s/migrations
    sqlalchemy.url = sqlite://
    '''

ALEMBIC_ENV = '''
    from alembic import context
    from sqlalchemy import engine_from_config, pool

    config = context.config
    engine = engine_from_config(config.get_section(config.config_ini_section), prefix="sqlalchemy.",
                                poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            context.configure(connection=connection, render_as_batch=True)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()
    '''


def alembic_0001(with_tag_index):
    return '''
        import sqlalchemy as sa
        from alembic import op

        revision = "0001"
        down_revision = None


        def upgrade():
            op.create_table("notes",
                            sa.Column("id", sa.Integer, primary_key=True),
                            sa.Column("body", sa.Text, nullable=False),
                            sa.Column("tag", sa.String(20)))
        ''' + ('''    op.create_index("ix_notes_tag", "notes", ["tag"])
        ''' if with_tag_index else "")


def alembic_0002(drops_tag_index):
    return '''
        import sqlalchemy as sa
        from alembic import op

        revision = "0002"
        down_revision = "0001"


        def upgrade():
            op.add_column("notes", sa.Column("pinned", sa.Boolean, nullable=False, server_default=sa.false()))
            op.create_index("ix_notes_pinned", "notes", ["pinned"])
        ''' + ('''    op.drop_index("ix_notes_tag", table_name="notes")
        ''' if drops_tag_index else "")


class AlembicProject:
    """An Alembic environment in `directory`; `migrate(path)` is
    `alembic upgrade head` on that SQLite file, through Alembic's API."""

    def __init__(self, directory, versions):
        self.directory = directory
        files = {"alembic.ini": ALEMBIC_INI, "migrations/env.py": ALEMBIC_ENV}
        files.update(("migrations/versions/%s" % name, text) for name, text in versions.items())
        for name, text in files.items():
            path = directory / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text).lstrip())
        self.key = "alembic-" + fingerprint(directory)

    def migrate(self, path, revision="head"):
        from alembic import command
        from alembic.config import Config

        config = Config(str(self.directory / "alembic.ini"))
        config.set_main_option("sqlalchemy.url", "sqlite:///" + str(path).replace("%", "%%"))
        command.upgrade(config, revision)


@pytest.fixture(scope="module")
def alembic_projects(tmp_path_factory):
    pytest.importorskip("alembic")
    released = {"0001_notes.py": alembic_0001(with_tag_index=True)}
    return {
        # What the team released: 0001 made an index on notes.tag.
        "released": AlembicProject(tmp_path_factory.mktemp("alembic-released"), released),
        # 0002 drops that index: upgraded and fresh databases agree.
        "good": AlembicProject(tmp_path_factory.mktemp("alembic-good"), dict(
            released, **{"0002_pinned.py": alembic_0002(drops_tag_index=True)})),
        # 0001 edited after its release to make the index no more: a fresh
        # build has none, an upgraded database keeps it.
        "edited": AlembicProject(tmp_path_factory.mktemp("alembic-edited"), {
            "0001_notes.py": alembic_0001(with_tag_index=False),
            "0002_pinned.py": alembic_0002(drops_tag_index=False)}),
    }


@pytest.fixture(scope="module")
def alembic_v1(alembic_projects, tmp_path_factory):
    path = tmp_path_factory.mktemp("alembic-snapshots") / "v1.sqlite"
    alembic_projects["released"].migrate(path)
    with open_db(path) as db:
        db.executemany("INSERT INTO notes (body, tag) VALUES (?, ?)", [("milk", "home"), ("standup", "work"), ("idea", None)])
    return path


def test_alembic_correct_migration_passes(module_client, alembic_projects, alembic_v1):
    good = alembic_projects["good"]
    key = module_client.build(good.key, good.migrate)
    result = module_client.check_snapshot(alembic_v1, migrate=good.migrate, build=key,
                                          expect={"version": "0001", "counts": {"notes": 3},
                                                  "assert": ["SELECT count(*) = 3 FROM notes WHERE pinned = 0"]})
    assert result["passed"] is True, result
    assert (result["from_version"], result["to_version"]) == ("0001", "0002")


def test_alembic_revision_leaving_an_index_behind_fails_naming_it(module_client, alembic_projects, alembic_v1):
    edited = alembic_projects["edited"]
    key = module_client.build(edited.key, edited.migrate)
    result = module_client.check_snapshot(alembic_v1, migrate=edited.migrate, build=key)
    assert result["passed"] is False
    assert len(result["failures"]) == 1, result
    (failure,) = result["failures"]
    assert failure.startswith("schema differs from the reference: index ix_notes_tag on notes"), failure
    message = str(pytest.raises(larder.SnapshotCheckFailed, larder.assert_passed, result).value)
    assert "snapshot v1.sqlite (0001 → 0002) failed its check against build %s: 1 failure" % key in message
    assert "\n  - schema differs from the reference: index ix_notes_tag on notes" in message
    module_client.store(result["kept_store"]).delete()


def test_alembic_check_in_remote_mode(hidden_server, alembic_projects, alembic_v1, tmp_path):
    """A server whose files are out of this machine's sight: the upload is
    downloaded, Alembic migrates the local copy, which is checked in before
    the server judges it."""
    good, edited = alembic_projects["good"], alembic_projects["edited"]
    with larder.Client(url=hidden_server.url, mode="remote") as client:
        # The reference, made here by the same migrator on an empty file and
        # uploaded (a build's migrator would need the server's files).
        fresh = tmp_path / "fresh.sqlite"
        good.migrate(fresh)
        with client.upload(fresh, label=unique("reference")) as reference:
            paths = []

            def migrate(path):
                paths.append((path, os.path.exists(path)))
                good.migrate(path)

            label = unique("remote-pass")
            result = client.check_snapshot(alembic_v1, migrate=migrate, store=reference, label=label,
                                           expect={"version": "0001", "counts": {"notes": 3},
                                                   "assert": ["SELECT count(*) = 3 FROM notes WHERE pinned = 0"]})
            assert result["passed"] is True, result
            assert (result["from_version"], result["to_version"]) == ("0001", "0002")
            assert result["kept_store"] is None and stores_labelled(client, label) == []
            ((path, existed),) = paths
            assert existed and os.path.basename(os.path.dirname(path)).startswith("larder-remote-")
            assert not os.path.exists(os.path.dirname(path))  # the local copy is gone

            # A failing one: kept with what the migrator made of the local copy.
            result = client.check_snapshot(alembic_v1, migrate=edited.migrate, store=reference)
            assert result["passed"] is False
            (failure,) = result["failures"]
            assert failure.startswith("schema differs from the reference: index ix_notes_tag on notes"), failure
            kept = client.store(result["kept_store"])
            assert kept.info["keep"] is True
            assert [row[0] for row in kept.query("SELECT name FROM pragma_table_info('notes')")["rows"]] == [
                "id", "body", "tag", "pinned"]
            kept.delete()

            # A migrator that raises half way: its store is kept with what it got to.
            def half_way(path):
                with open_db(path) as db:
                    db.execute("ALTER TABLE notes ADD COLUMN half INTEGER")
                raise RuntimeError("0002 failed half way")

            label = unique("remote-raises")
            with pytest.raises(RuntimeError, match="half way"):
                client.check_snapshot(alembic_v1, migrate=half_way, store=reference, label=label)
            (kept_info,) = stores_labelled(client, label)
            assert kept_info["keep"] is True
            kept = client.store(kept_info["id"])
            assert "half" in [row[0] for row in kept.query("SELECT name FROM pragma_table_info('notes')")["rows"]]
            kept.delete()


# --- the API, with a migrator of Python's sqlite3 ----------------------------------

V1 = ("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL, tag TEXT);"
      "INSERT INTO notes (body, tag) VALUES ('a', 'x'), ('b', 'y'), ('c', NULL);"
      "PRAGMA user_version = 1;")


def sqlite_migrate(path):
    """The app's migrator: PRAGMA user_version is its version; 1 dropped
    notes.legacy, 2 adds notes.pinned."""
    with open_db(path) as db:
        if db.execute("PRAGMA user_version").fetchone()[0] < 1:
            db.execute("ALTER TABLE notes DROP COLUMN legacy")
            db.execute("PRAGMA user_version = 1")
        if db.execute("PRAGMA user_version").fetchone()[0] < 2:
            db.execute("BEGIN")
            db.execute("ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0")
            db.execute("CREATE INDEX notes_pinned ON notes (pinned)")
            db.execute("PRAGMA user_version = 2")
            db.execute("COMMIT")


def sqlite_build(path):
    with open_db(path) as db:
        db.executescript(V1.split("INSERT")[0] + "PRAGMA user_version = 1;")
    sqlite_migrate(path)


def make_snapshot(path, sql=V1):
    with open_db(path) as db:
        db.executescript(sql)
    return path


def make_snapshot_folder(snapshots):
    """Four old databases: v1 that migrates right, v1-before whose
    expect.json's before is false, v0-legacy from an older release with a
    column that version 1 drops (data and all), and crash, which the
    migrator fails on."""
    make_snapshot(snapshots / "v1.sqlite")
    make_snapshot(snapshots / "v1-before.sqlite")
    (snapshots / "v1-before.expect.json").write_text(json.dumps({"before": ["SELECT count(*) = 9 FROM notes"]}))
    make_snapshot(snapshots / "v0-legacy.sqlite",
                  "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL, tag TEXT, legacy TEXT);"
                  "INSERT INTO notes (body, tag, legacy) VALUES ('a', 'x', 'l1'), ('b', 'y', 'l2'), ('c', NULL, NULL);")
    make_snapshot(snapshots / "crash.sqlite", V1 + "CREATE TABLE crash_me (x);")


@pytest.fixture(scope="module")
def sqlite_key(module_client):
    return module_client.build(unique("sqlite-app"), sqlite_build)


def test_upload_keeps_the_file_as_it_is(client, tmp_path):
    snapshot = make_snapshot(tmp_path / "v1.sqlite")
    label = unique("upload")
    store = client.upload(snapshot, label=label, ttl_seconds=600)
    assert (store.info["label"], store.info["template"]) == (label, None)
    assert store.counts() == {"notes": 3}
    with open_db(store.path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (1,)
    store.delete()
    # Bytes too.
    with client.upload(snapshot.read_bytes()) as store:
        assert store.counts("notes") == {"notes": 3}
    with pytest.raises(larder.LarderError) as caught:
        client.upload(b"not a database")
    assert (caught.value.status, caught.value.code) == (400, "bad_request")


def test_check_answers_the_result_passed_or_not(client, sqlite_key, tmp_path):
    store = client.upload(make_snapshot(tmp_path / "v1.sqlite"))
    sqlite_migrate(store.path)
    passed = client.check(store, {"build": sqlite_key}, snapshot="v1.sqlite")
    assert (passed["passed"], passed["snapshot"], passed["from_version"], passed["to_version"]) == (True, "v1.sqlite", "1", "2")
    with open_db(store.path) as db:
        db.execute("UPDATE notes SET tag = NULL")
    failed = client.check(store.id, {"build": sqlite_key}, expect={"counts": {"notes": 4}})
    assert failed["passed"] is False
    assert "notes.tag held 2 non-NULL values; the migrated store has 0" in failed["failures"], failed
    assert "expected 4 rows in notes, found 3" in failed["failures"], failed
    # data=False skips the data-kept rule.
    assert client.check(store, {"build": sqlite_key}, data=False)["passed"] is True
    # Against another store, or a template (whose schema this is not).
    with client.upload(make_snapshot(tmp_path / "ref.sqlite")) as reference:
        sqlite_migrate(reference.path)
        assert client.check(store, {"store": reference.id}, data=False)["passed"] is True
    against_template = client.check(store, {"template": "gallery", "version": "latest"})
    assert against_template["passed"] is False
    assert any(f.startswith("schema differs from the reference") for f in against_template["failures"])
    store.delete()


def test_what_cannot_be_judged_raises(client, sqlite_key, tmp_path):
    with client.create_store(template="gallery") as made:
        with pytest.raises(larder.LarderError) as caught:
            client.check(made, {"build": sqlite_key})
    assert (caught.value.status, caught.value.code, caught.value.details.get("reason")) == (400, "bad_request", "not_an_upload")
    with client.upload(make_snapshot(tmp_path / "v1.sqlite")) as store:
        for against, code in (({"build": unique("no-such")}, "unknown_build"),
                              ({"template": "no_such_template"}, "unknown_template"),
                              ({"template": "gallery", "version": "999"}, "unknown_version"),
                              ({"store": "st_nosuchstore"}, "store_not_found")):
            with pytest.raises(larder.LarderError) as caught:
                client.check(store, against)
            assert (caught.value.status, caught.value.code) == (404, code), against
        with pytest.raises(larder.LarderError) as caught:
            client.check(store, {"build": sqlite_key, "store": store.id})
        assert (caught.value.status, caught.value.code) == (400, "bad_request")
        with pytest.raises(larder.LarderError) as caught:
            client.check(store, {"build": sqlite_key}, expect={"nonsense": 1})
        assert (caught.value.status, caught.value.code) == (400, "bad_request")
    with pytest.raises(larder.LarderError) as caught:
        client.check("st_nosuchstore", {"build": sqlite_key})
    assert (caught.value.status, caught.value.code) == (404, "store_not_found")


def test_check_against_a_build_still_building_is_a_409(client, tmp_path):
    key = unique("building")
    status, claim = client._exchange("POST", "/builds", body={"key": key})
    assert status == 201
    try:
        with client.upload(make_snapshot(tmp_path / "v1.sqlite")) as store:
            with pytest.raises(larder.LarderError) as caught:
                client.check(store, {"build": key})
            assert (caught.value.status, caught.value.code) == (409, "conflict")
    finally:
        client.discard_build(key)


def test_check_snapshot_needs_exactly_one_reference(client, sqlite_key, tmp_path):
    snapshot = make_snapshot(tmp_path / "v1.sqlite")
    for references in ({}, {"build": sqlite_key, "template": "gallery"}):
        with pytest.raises(ValueError, match="exactly one of build=, template= or store="):
            client.check_snapshot(snapshot, migrate=sqlite_migrate, **references)
    (tmp_path / "v1.expect.json").write_text("{not json")
    with pytest.raises(ValueError, match="v1.expect.json is not JSON"):
        client.check_snapshot(snapshot, migrate=sqlite_migrate, build=sqlite_key)


def test_check_snapshot_keeps_the_store_when_the_migrator_raises(client, sqlite_key, tmp_path):
    snapshot = make_snapshot(tmp_path / "v1.sqlite")
    label = unique("raises")
    failure = RuntimeError("0002 failed: no such column: pinned")

    def broken(path):
        raise failure

    with pytest.raises(RuntimeError) as caught:
        client.check_snapshot(snapshot, migrate=broken, build=sqlite_key, label=label)
    assert caught.value is failure
    (kept,) = stores_labelled(client, label)
    assert kept["keep"] is True
    if sys.version_info >= (3, 11):
        assert any(kept["id"] in note for note in caught.value.__notes__)
    client.store(kept["id"]).delete()
    # A server error deletes the store: nothing was judged.
    with pytest.raises(larder.LarderError):
        client.check_snapshot(snapshot, migrate=sqlite_migrate, build=unique("no-such"), label=label)
    assert stores_labelled(client, label) == []


def test_check_snapshots_of_a_directory(module_client, sqlite_key, tmp_path):
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    make_snapshot_folder(snapshots)
    (snapshots / "notes.txt").write_text("not a snapshot")

    def migrate(path):
        with open_db(path) as db:
            if db.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'crash_me'").fetchone()[0]:
                raise ValueError("the migrator broke on this one")
        sqlite_migrate(path)

    results = larder.check_snapshots(snapshots, migrate=migrate, build=sqlite_key, client=module_client)
    assert [r["snapshot"] for r in results] == ["crash.sqlite", "v0-legacy.sqlite", "v1-before.sqlite", "v1.sqlite"]
    assert [r["passed"] for r in results] == [False, False, False, True]
    crash, legacy, before, good = results
    assert crash["failures"] == ["the migrator raised ValueError: the migrator broke on this one"]
    assert "Traceback" in crash["traceback"] and "the migrator broke" in crash["traceback"]
    assert legacy["failures"] == ["notes.legacy held 2 non-NULL values; the migrated store has no column legacy"], legacy
    assert (legacy["from_version"], legacy["to_version"]) == (None, "2")  # user_version 0: none
    assert before["failures"] == ["before is false (got 0): SELECT count(*) = 9 FROM notes"]
    kept = [r["kept_store"] for r in results if not r["passed"]]
    assert all(kept) and good["kept_store"] is None
    for result in results[:3]:
        with pytest.raises(larder.SnapshotCheckFailed) as caught:
            larder.assert_passed(result)
        assert result["snapshot"] in str(caught.value) and result["kept_store"] in str(caught.value)
    assert "the migrator's traceback:" in describe(crash)
    for store_id in kept:
        module_client.store(store_id).delete()

    with pytest.raises(ValueError, match="no \\*.sqlite snapshots in"):
        larder.check_snapshots(tmp_path, migrate=sqlite_migrate, build=sqlite_key, client=module_client)
    with pytest.raises(ValueError, match="no snapshot directory"):
        larder.check_snapshots(tmp_path / "missing", migrate=sqlite_migrate, build=sqlite_key, client=module_client)


def describe(result):
    with pytest.raises(larder.SnapshotCheckFailed) as caught:
        larder.assert_passed(result)
    return str(caught.value)


def test_check_snapshot_of_a_megabyte(module_client, sqlite_key, tmp_path):
    """About 1 MB of notes: the whole call (upload, migrate, check, delete) stays quick."""
    snapshot = make_snapshot(tmp_path / "v1.sqlite")
    with open_db(snapshot) as db:
        db.execute("BEGIN")
        db.executemany("INSERT INTO notes (body, tag) VALUES (?, ?)",
                       (("note %d %s" % (i, "x" * 80), "t%d" % (i % 7)) for i in range(9000)))
        db.execute("COMMIT")
    size = os.path.getsize(str(snapshot))
    assert 800000 < size < 1500000, size
    began = time.monotonic()
    result = module_client.check_snapshot(snapshot, migrate=sqlite_migrate, build=sqlite_key)
    elapsed = time.monotonic() - began
    assert result["passed"] is True, result
    print("check_snapshot of %d bytes: %.0f ms in all, the server's check %s ms" % (size, elapsed * 1000, result["ms"]))
    assert elapsed < 5


# --- the pytest plugin: one test per snapshot ---------------------------------------

SUITE_APP = '''
import contextlib
import sqlite3


def migrate(path):
    """The app's migrator: PRAGMA user_version is its version; 1 dropped
    notes.legacy, 2 adds notes.pinned."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
        if db.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'crash_me'").fetchone()[0]:
            raise ValueError("the migrator broke on this one")
        if db.execute("PRAGMA user_version").fetchone()[0] < 1:
            db.execute("ALTER TABLE notes DROP COLUMN legacy")
            db.execute("PRAGMA user_version = 1")
        if db.execute("PRAGMA user_version").fetchone()[0] < 2:
            db.execute("ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0")
            db.execute("CREATE INDEX notes_pinned ON notes (pinned)")
            db.execute("PRAGMA user_version = 2")


def build(path):
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL, tag TEXT)")
        db.execute("PRAGMA user_version = 1")
    migrate(path)
'''

SUITE_CONFTEST = '''
import os

import app


def pytest_larder_build(client):
    return client.build(os.environ["BUILD_KEY"], app.build)
'''

SUITE_TESTS = '''
import pathlib

import pytest

import app
import larder

SNAPSHOTS = pathlib.Path(__file__).parent / "snapshots"


@pytest.mark.parametrize("snapshot", larder.snapshots(SNAPSHOTS))
def test_snapshot_migrates(larder_check_snapshot, snapshot):
    larder_check_snapshot(snapshot, migrate=app.migrate)
'''


def test_the_plugin_makes_one_test_per_snapshot(server, tmp_path):
    suite = tmp_path / "suite"
    snapshots = suite / "snapshots"
    snapshots.mkdir(parents=True)
    for name, text in (("app.py", SUITE_APP), ("conftest.py", SUITE_CONFTEST), ("test_snapshots.py", SUITE_TESTS)):
        (suite / name).write_text(text)
    make_snapshot_folder(snapshots)

    key, run = unique("plugin-app"), unique("run")
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("LARDER_", "PYTEST_")) and k != "PYTHONPATH"}
    environment.update({"LARDER_URL": server.url, "BUILD_KEY": key, "LARDER_RUN": run})
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-W", "error::ResourceWarning",
               "--rootdir", str(suite), "--junitxml", str(tmp_path / "junit.xml"), "-v", "test_snapshots.py"]
    result = subprocess.run(command, cwd=str(suite), env=environment, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, timeout=120)
    output = result.stdout.decode("utf-8", "replace")
    assert result.returncode == 1, output
    assert "3 failed, 1 passed" in output, output
    nodes = {name: "test_snapshots.py::test_snapshot_migrates[%s]" % name
             for name in ("crash.sqlite", "v0-legacy.sqlite", "v1-before.sqlite", "v1.sqlite")}
    assert nodes["v1.sqlite"] + " PASSED" in output, output
    # Each failure says what failed, in its own words.
    assert ("larder.SnapshotCheckFailed: snapshot v0-legacy.sqlite (no version → 2) failed its check against "
            "build %s: 1 failure\n" % key) in output, output
    assert "  - notes.legacy held 2 non-NULL values; the migrated store has no column legacy\n" in output, output
    assert "snapshot v1-before.sqlite (1 → 2) failed its check against build %s" % key in output, output
    assert "  - before is false (got 0): SELECT count(*) = 9 FROM notes\n" in output, output
    assert "ValueError: the migrator broke on this one" in output, output  # the migrator's own traceback

    client = larder.Client(url=server.url)
    # The passing snapshot's store is gone; the failing ones' are kept, labelled with their
    # run and test (RUN/PACKAGE/TEST), their artifacts saved and named in the report (by
    # node id), as a failed larder_store's.
    labels = {name: "%s/test_snapshots.py/test_snapshot_migrates[%s]" % (run, name) for name in nodes}
    assert stores_labelled(client, labels["v1.sqlite"]) == []
    cases = {case.get("name"): case for case in ElementTree.parse(str(tmp_path / "junit.xml")).iter("testcase")}
    for name in ("crash.sqlite", "v0-legacy.sqlite", "v1-before.sqlite"):
        (kept,) = stores_labelled(client, labels[name])
        assert kept["keep"] is True
        artifact = suite / "larder-artifacts" / ("%s-%s.zip" % (file_safe(nodes[name]), kept["id"]))
        assert "store %s kept; artifact: %s" % (kept["id"], artifact) in output, output
        assert "%s: store %s, artifact %s" % (nodes[name], kept["id"], artifact) in output, output
        properties = {p.get("name"): p.get("value") for p in cases["test_snapshot_migrates[%s]" % name].iter("property")}
        assert properties == {"larder_store": kept["id"], "larder_artifact": str(artifact)}
        with zipfile.ZipFile(str(artifact)) as archive:
            archive.extract("store.sqlite", str(tmp_path / name))
        migrated = columns(tmp_path / name / "store.sqlite", "notes")
        if name == "crash.sqlite":
            assert "pinned" not in migrated  # as the migrator left it
        else:
            assert "pinned" in migrated and "legacy" not in migrated
        client.store(kept["id"]).delete()
    client.discard_build(key)
    client.close()


def test_the_fixture_needs_a_reference(server, tmp_path):
    suite = tmp_path / "suite"
    (suite / "snapshots").mkdir(parents=True)
    (suite / "app.py").write_text(SUITE_APP)
    (suite / "test_snapshots.py").write_text(SUITE_TESTS)
    make_snapshot(suite / "snapshots" / "v1.sqlite")
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("LARDER_", "PYTEST_")) and k != "PYTHONPATH"}
    environment["LARDER_URL"] = server.url
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(suite)],
                            cwd=str(suite), env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    output = result.stdout.decode("utf-8", "replace")
    assert result.returncode == 1, output
    assert "larder_check_snapshot: nothing to check against: pass build=, template= or store=" in output, output
    # No snapshots: a collection error, not a pass.
    os.unlink(str(suite / "snapshots" / "v1.sqlite"))
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(suite)],
                            cwd=str(suite), env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    output = result.stdout.decode("utf-8", "replace")
    assert result.returncode == 2, output
    assert "ValueError: no *.sqlite snapshots in" in output, output


def readme_example(marker):
    """The README's ```python block that holds `marker`."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "README.md"), encoding="utf-8") as f:
        blocks = [block.split("```", 1)[0] for block in f.read().split("```python\n")[1:]]
    (found,) = [block for block in blocks if marker in block]
    return found


@pytest.mark.parametrize("tool", ["django", "alembic"])
def test_the_readme_examples_pass(server, tmp_path, request, tool):
    """The README's Django and Alembic examples, as they are, in a project laid out as they say."""
    if tool == "django":
        project, marker = DjangoProject(tmp_path / "project", DJANGO_0002_GOOD), "manage.py"
    else:
        project, marker = AlembicProject(tmp_path / "project", {
            "0001_notes.py": alembic_0001(with_tag_index=True),
            "0002_pinned.py": alembic_0002(drops_tag_index=True)}), "from alembic import command"
    snapshot = request.getfixturevalue(tool + "_v1")
    (project.directory / "tests" / "snapshots").mkdir(parents=True)
    (project.directory / "tests" / "test_migrations.py").write_text(readme_example(marker))
    shutil.copyfile(str(snapshot), str(project.directory / "tests" / "snapshots" / "v1.sqlite"))
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("LARDER_", "PYTEST_")) and k != "PYTHONPATH"}
    environment["LARDER_URL"] = server.url
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-W", "error", "-v", "tests"],
                            cwd=str(project.directory), env=environment, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, timeout=120)
    output = result.stdout.decode("utf-8", "replace")
    assert result.returncode == 0, output
    assert "tests/test_migrations.py::test_old_database_migrates[v1.sqlite] PASSED" in output, output
