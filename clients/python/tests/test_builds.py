"""App-built templates ("builds") against a real server: `Client.build`
runs a migrator of the application's own (here: Python's sqlite3 leaving a
database the way Django's migrator does) once per key, and stores are copies
of what it built. Every test uses keys of its own, so they do not meet on the
module's shared server.
"""
import contextlib
import sqlite3
import threading
import time
import uuid

import pytest

import larder


def open_db(path):
    """The SQLite file with Python's own driver: autocommit, closed on leaving `with`."""
    return contextlib.closing(sqlite3.connect(str(path), isolation_level=None))


def unique(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex)


MIGRATIONS = [
    ("contenttypes", "0001_initial"),
    ("shop", "0001_initial"),
    ("shop", "0002_product_price"),
    ("shop", "0003_order"),
]


def django_migrate(path, products=("Teapot", "Kettle")):
    """What `manage.py migrate` leaves behind: the app's tables, the
    django_migrations bookkeeping and data migrations' rows; committed,
    and the connection closed."""
    db = sqlite3.connect(path)
    try:
        with db:
            db.execute('CREATE TABLE "django_migrations" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, '
                       '"app" varchar(255) NOT NULL, "name" varchar(255) NOT NULL, "applied" datetime NOT NULL)')
            db.execute('CREATE TABLE "django_content_type" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, '
                       '"app_label" varchar(100) NOT NULL, "model" varchar(100) NOT NULL)')
            db.execute('CREATE TABLE "shop_product" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, '
                       '"name" varchar(100) NOT NULL, "price" decimal NOT NULL)')
            db.execute('CREATE TABLE "shop_order" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, '
                       '"product_id" bigint NOT NULL REFERENCES "shop_product" ("id") DEFERRABLE INITIALLY DEFERRED, '
                       '"quantity" integer unsigned NOT NULL CHECK ("quantity" >= 0))')
            db.execute('CREATE INDEX "shop_order_product_id_idx" ON "shop_order" ("product_id")')
            db.executemany('INSERT INTO "django_content_type" ("app_label", "model") VALUES (?, ?)',
                           [("shop", "product"), ("shop", "order")])
            db.executemany('INSERT INTO "shop_product" ("name", "price") VALUES (?, ?)',
                           [(name, 10 + i) for i, name in enumerate(products)])
            db.executemany('INSERT INTO "django_migrations" ("app", "name", "applied") VALUES (?, ?, ?)',
                           [(app, name, "2024-06-13 06:11:02.%06d" % i) for i, (app, name) in enumerate(MIGRATIONS)])
    finally:
        db.close()


class Migrator:
    """A migrate callback that records its calls (thread, path, when it
    started and ended), optionally sleeping first, waiting for an event or
    failing after it did its work."""

    def __init__(self, sleep=0.0, fail=None, started=None, release=None, products=("Teapot", "Kettle")):
        self.sleep, self.fail, self.started, self.release, self.products = sleep, fail, started, release, products
        self.calls = []
        self.lock = threading.Lock()

    def __call__(self, path):
        began = time.monotonic()
        if self.started is not None:
            self.started.set()
        if self.release is not None:
            assert self.release.wait(30), "never released"
        time.sleep(self.sleep)
        django_migrate(path, self.products)
        with self.lock:
            self.calls.append({"thread": threading.current_thread().name, "path": path,
                               "began": began, "ended": time.monotonic()})
        if self.fail is not None:
            raise self.fail


def run_threads(*targets):
    """Runs each (name, function) in a thread of its own at once; {name: (result or exception, ended at)}."""
    results = {}
    barrier = threading.Barrier(len(targets))

    def run(name, function):
        barrier.wait()
        try:
            outcome = function()
        except BaseException as error:  # handed to the test
            outcome = error
        results[name] = (outcome, time.monotonic())

    threads = [threading.Thread(target=run, args=target, name=target[0]) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert set(results) == {name for name, _ in targets}, "a thread did not finish"
    return results


def product_names(store):
    return [row[0] for row in store.query('SELECT "name" FROM "shop_product" ORDER BY "id"')["rows"]]


def test_build_once_then_stores_are_independent_copies(client):
    key = unique("django")
    migrate = Migrator()
    assert client.build(key, migrate, label="shop migrations") == key
    assert len(migrate.calls) == 1
    build_path = migrate.calls[0]["path"]
    assert isinstance(build_path, str)

    info = client.build_info(key)
    assert (info["key"], info["state"], info["label"]) == (key, "ready", "shop migrations")
    assert info["counts"]["shop_product"] == 2
    assert info["counts"]["shop_order"] == 0
    assert info["size_bytes"] > 0
    assert key in [b["key"] for b in client.builds()]

    # Built already: answered at once, without migrating again.
    assert client.build(key, migrate) == key
    assert len(migrate.calls) == 1

    one = client.create_store(build=key, label="one")
    two = client.create_store(build=key, timeout_ms=5000)
    for store in (one, two):
        assert store.info["build"] == key
        assert store.info["template"] is None
        assert store.path != build_path
        assert store.info["counts"]["shop_product"] == 2
        assert product_names(store) == ["Teapot", "Kettle"]
        # Django's own bookkeeping is kept, so its migrator finds nothing to do.
        rows = store.query('SELECT "app", "name" FROM "django_migrations" ORDER BY "id"')["rows"]
        assert rows == [list(m) for m in MIGRATIONS]
        with open_db(store.path) as db:
            assert db.execute("SELECT count(*) FROM django_content_type").fetchone() == (2,)
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)

    # Each store is a copy of its own: writes to one show nowhere else.
    with open_db(one.path) as db:
        db.execute("INSERT INTO shop_product (name, price) VALUES ('Samovar', 99)")
        db.execute("INSERT INTO shop_order (product_id, quantity) VALUES (1, 3)")
        db.execute("DELETE FROM django_migrations WHERE name = '0003_order'")
    assert one.counts(["shop_product", "shop_order"]) == {"shop_product": 3, "shop_order": 1}
    assert two.counts(["shop_product", "shop_order"]) == {"shop_product": 2, "shop_order": 0}
    two.query("UPDATE shop_product SET name = 'Pot' WHERE id = 1")
    assert product_names(one) == ["Teapot", "Kettle", "Samovar"]
    three = client.create_store(build=key)
    assert product_names(three) == ["Teapot", "Kettle"]
    assert three.query("SELECT count(*) FROM django_migrations")["rows"] == [[len(MIGRATIONS)]]
    assert three.counts(["shop_order"]) == {"shop_order": 0}
    assert client.build_info(key)["counts"]["shop_product"] == 2

    # A reset goes back to the build, in place.
    assert one.reset().info["counts"]["shop_product"] == 2
    assert product_names(one) == ["Teapot", "Kettle"]

    # Discarding the build leaves its stores; the next build() builds again.
    client.discard_build(key)
    assert key not in [b["key"] for b in client.builds()]
    assert product_names(three) == ["Teapot", "Kettle"]
    for store in (one, two, three):
        store.delete()
    assert client.build(key, migrate) == key
    assert len(migrate.calls) == 2
    client.discard_build(key)


def test_two_workers_at_once_build_it_once(server):
    key = unique("workers")
    migrate = Migrator(sleep=0.5)
    clients = [larder.Client(url=server.url), larder.Client(url=server.url)]
    started = time.monotonic()
    results = run_threads(("a", lambda: clients[0].build(key, migrate)),
                          ("b", lambda: clients[1].build(key, migrate)))
    assert results["a"][0] == key and results["b"][0] == key
    assert len(migrate.calls) == 1
    (call,) = migrate.calls
    builder = call["thread"]
    waiter = "b" if builder == "a" else "a"
    # The waiter answered only once the build was finished, after the builder's migrate.
    assert results[waiter][1] >= call["ended"]
    assert results[waiter][1] - started >= 0.5
    assert clients[0].build_info(key)["state"] == "ready"
    with clients[1].create_store(build=key) as store:
        assert product_names(store) == ["Teapot", "Kettle"]
    clients[0].discard_build(key)
    for c in clients:
        c.close()


def test_a_failing_migrate_discards_the_build_and_raises(client):
    key = unique("failing")
    failure = RuntimeError("0002_product_price: no such column: price")
    broken = Migrator(fail=failure)
    with pytest.raises(RuntimeError) as caught:
        client.build(key, broken)
    assert caught.value is failure
    assert len(broken.calls) == 1
    with pytest.raises(larder.LarderError) as gone:
        client.build_info(key)
    assert (gone.value.status, gone.value.code) == (404, "unknown_build")
    with pytest.raises(larder.LarderError) as gone:
        client.create_store(build=key)
    assert (gone.value.status, gone.value.code) == (404, "unknown_build")

    # The same key builds again, from an empty file.
    fixed = Migrator(products=("Mug",))
    assert client.build(key, fixed) == key
    assert len(fixed.calls) == 1
    with client.create_store(build=key) as store:
        assert product_names(store) == ["Mug"]
    client.discard_build(key)


def test_a_waiter_builds_it_when_its_builder_fails(server):
    key = unique("takeover")
    started = threading.Event()
    failing = Migrator(sleep=0.5, fail=ValueError("the builder's migrator failed"), started=started)
    taking_over = Migrator(products=("Samovar",))
    a, b = larder.Client(url=server.url), larder.Client(url=server.url)

    def second():
        assert started.wait(30)  # a builds: b comes while it does, and waits
        return b.build(key, taking_over)

    began = time.monotonic()
    results = run_threads(("a", lambda: a.build(key, failing)), ("b", second))
    assert isinstance(results["a"][0], ValueError)
    assert results["b"][0] == key
    assert [call["thread"] for call in failing.calls] == ["a"]
    assert [call["thread"] for call in taking_over.calls] == ["b"]
    # b waited for a, then built it itself.
    assert taking_over.calls[0]["began"] >= failing.calls[0]["ended"]
    assert results["b"][1] - began >= 0.5
    assert b.build_info(key)["state"] == "ready"
    with a.create_store(build=key) as store:
        assert product_names(store) == ["Samovar"]
    a.discard_build(key)
    a.close()
    b.close()


def test_waiting_for_a_build_under_way_and_timeouts(server):
    key = unique("slow")
    started, release = threading.Event(), threading.Event()
    slow = Migrator(started=started, release=release)
    builder_client, c = larder.Client(url=server.url), larder.Client(url=server.url)
    builder = threading.Thread(target=lambda: builder_client.build(key, slow))
    builder.start()
    try:
        assert started.wait(30)
        assert c.build_info(key)["state"] == "building"
        assert "path" not in c.build_info(key)

        # build() that is not ready in time: larder.Timeout; its migrate is never called.
        unused = Migrator()
        began = time.monotonic()
        with pytest.raises(larder.Timeout) as caught:
            c.build(key, unused, timeout_ms=300)
        assert 0.25 <= time.monotonic() - began < 10
        assert (caught.value.status, caught.value.code) == (408, "timeout")
        assert caught.value.details["key"] == key
        assert unused.calls == []

        # So does a store of it, waited for server-side.
        with pytest.raises(larder.Timeout) as caught:
            c.create_store(build=key, timeout_ms=200)
        assert (caught.value.status, caught.value.code) == (408, "timeout")

        # A store asked for while it builds comes once it is built.
        threading.Timer(0.3, release.set).start()
        began = time.monotonic()
        store = c.create_store(build=key, timeout_ms=20000)
        assert time.monotonic() - began >= 0.25
    finally:
        release.set()
        builder.join(60)
    assert store.info["build"] == key
    assert product_names(store) == ["Teapot", "Kettle"]
    assert len(slow.calls) == 1
    store.delete()
    c.discard_build(key)
    c.close()
    builder_client.close()


def test_a_build_left_with_a_write_transaction_is_refused_and_discarded(client):
    key = unique("open-transaction")
    held = []

    def migrate(path):
        django_migrate(path)
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO shop_product (name, price) VALUES ('half-done', 1)")
        held.append(db)  # not committed, not closed: finish cannot check it

    try:
        with pytest.raises(larder.LarderError) as caught:
            client.build(key, migrate)
        assert (caught.value.status, caught.value.code) == (409, "conflict")
    finally:
        for db in held:
            db.close()
    with pytest.raises(larder.LarderError) as gone:
        client.build_info(key)
    assert gone.value.code == "unknown_build"


def test_build_errors(client):
    with pytest.raises(larder.LarderError) as caught:
        client.create_store(build=unique("no-such"))
    assert (caught.value.status, caught.value.code) == (404, "unknown_build")
    assert not isinstance(caught.value, larder.Timeout)

    never = Migrator()
    with pytest.raises(larder.LarderError) as caught:
        client.build("bad key!", never)
    assert (caught.value.status, caught.value.code) == (400, "bad_request")
    assert never.calls == []
    with pytest.raises(larder.LarderError) as caught:
        client.build("k" * 129, never)
    assert caught.value.code == "bad_request"

    with pytest.raises(larder.LarderError) as caught:
        client.build_info(unique("no-such"))
    assert (caught.value.status, caught.value.code) == (404, "unknown_build")
    with pytest.raises(larder.LarderError) as caught:
        client.discard_build(unique("no-such"))
    assert (caught.value.status, caught.value.code) == (404, "unknown_build")

    key = client.build(unique("errors"), Migrator())
    # A build is copied as it is: no template, fixtures or fork with it.
    for extra in ({"template": "gallery"}, {"fixtures": ["artists"]}, {"version": "1"}):
        with pytest.raises(larder.LarderError) as caught:
            client.create_store(build=key, **extra)
        assert (caught.value.status, caught.value.code) == (400, "bad_request"), extra
    # timeout_ms is how long to wait for a build: only with one.
    with pytest.raises(larder.LarderError) as caught:
        client.create_store(timeout_ms=1000)
    assert (caught.value.status, caught.value.code) == (400, "bad_request")
    client.discard_build(key)
