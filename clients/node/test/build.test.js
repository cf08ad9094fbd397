// App-built templates against the real server: build(), and stores made of
// a build. The `sqlite3` command line shell stands in for the application's
// own migrator, writing the database with its own driver.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

import { Larder, LarderError, LarderTimeout } from 'larder-sqlite';
import { runPrefix, withStore } from 'larder-sqlite/test';
import { startServer } from './support.js';

let server;
let larder;

before(async () => {
  server = await startServer();
  larder = new Larder({ url: server.url });
});

after(async () => {
  await server?.stop();
});

/** Runs SQL on the file at `path` as another program (the app's driver) would. */
function sqlite(path, sql) {
  return execFileSync('sqlite3', [path, sql], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

// What a Django-style migrator leaves: the app's tables, some seed rows and
// its own bookkeeping table.
const MIGRATIONS = `
CREATE TABLE django_migrations (id INTEGER PRIMARY KEY AUTOINCREMENT, app TEXT NOT NULL, name TEXT NOT NULL, applied TEXT NOT NULL);
CREATE TABLE artists (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
INSERT INTO django_migrations (app, name, applied) VALUES ('gallery', '0001_initial', '2024-06-01T00:00:00Z');
CREATE TABLE artworks (id INTEGER PRIMARY KEY, artist_id INTEGER NOT NULL REFERENCES artists(id), title TEXT NOT NULL);
INSERT INTO django_migrations (app, name, applied) VALUES ('gallery', '0002_artworks', '2024-06-01T00:00:01Z');
INSERT INTO artists (id, name) VALUES (1, 'Hilma af Klint'), (2, 'Katsushika Hokusai'), (3, 'Agnes Martin');
INSERT INTO artworks (artist_id, title) VALUES (1, 'The Ten Largest'), (2, 'The Great Wave');
`;

function migrator() {
  const state = { calls: 0, paths: [] };
  state.migrate = async (path) => {
    state.calls += 1;
    state.paths.push(path);
    assert.equal(typeof path, 'string');
    assert.ok(existsSync(path), `the build file ${path} exists`);
    sqlite(path, MIGRATIONS);
  };
  return state;
}

const newKey = () => `node-${randomUUID()}`;

describe('app-built templates', () => {
  test('build() runs the migrator once; stores are independent copies of the build', async () => {
    const key = newKey();
    const m = migrator();
    assert.equal(await larder.build(key, m.migrate, { label: 'node build' }), key);
    assert.equal(m.calls, 1);

    const info = await larder.buildInfo(key);
    assert.equal(info.key, key);
    assert.equal(info.state, 'ready');
    assert.equal(info.label, 'node build');
    assert.equal(info.counts.artists, 3);
    assert.equal(info.counts.artworks, 2);
    assert.ok(info.finished_at);
    const listed = (await larder.builds()).find((b) => b.key === key);
    assert.equal(listed?.state, 'ready');

    // Built already: answers at once, without migrating again.
    assert.equal(await larder.build(key, m.migrate), key);
    assert.equal(m.calls, 1);

    const one = await larder.createStore({ build: key, label: 'node build one' });
    const two = await larder.createStore({ build: key });
    try {
      for (const store of [one, two]) {
        assert.equal(store.info.build, key);
        assert.equal(store.info.counts.artists, 3);
        assert.equal(store.info.counts.artworks, 2);
        assert.notEqual(store.path, m.paths[0]);
        const applied = await store.query('SELECT name FROM django_migrations ORDER BY id');
        assert.deepEqual(applied.rows, [['0001_initial'], ['0002_artworks']]);
      }
      assert.equal(one.info.label, 'node build one');
      assert.notEqual(one.path, two.path);

      // Writes into one (by the app's driver, on its file) stay out of the other.
      sqlite(one.path, "INSERT INTO artists (id, name) VALUES (4, 'Sonia Delaunay'); DELETE FROM artworks;");
      await two.query('DELETE FROM artists WHERE id = 1');
      assert.deepEqual(await one.counts({ tables: ['artists', 'artworks'] }), { artists: 4, artworks: 0 });
      assert.deepEqual(await two.counts({ tables: ['artists', 'artworks'] }), { artists: 2, artworks: 2 });
      assert.equal(sqlite(two.path, 'SELECT count(*) FROM artists WHERE id = 4').trim(), '0');

      // ... and out of the build: a new store is a copy of it as it was built.
      const three = await larder.createStore({ build: key });
      assert.deepEqual(await three.counts({ tables: ['artists', 'artworks'] }), { artists: 3, artworks: 2 });
      await three.delete();

      // reset goes back to the build.
      await one.reset();
      assert.deepEqual(await one.counts({ tables: ['artists', 'artworks'] }), { artists: 3, artworks: 2 });
    } finally {
      await one.delete();
      await two.delete();
      await larder.discardBuild(key);
    }
    await assert.rejects(larder.buildInfo(key), { name: 'LarderError', status: 404, code: 'unknown_build' });
  });

  test('concurrent build() calls: one migrates, the other waits until it is done', async () => {
    const key = newKey();
    const clients = [new Larder({ url: server.url }), new Larder({ url: server.url })];
    let calls = 0;
    let migrated = null;
    const migrate = async (path) => {
      calls += 1;
      await sleep(500);
      sqlite(path, MIGRATIONS);
      migrated = Date.now();
    };
    const resolvedAt = [];
    const started = Date.now();
    const keys = await Promise.all(
      clients.map((client, i) => client.build(key, migrate).then((k) => {
        resolvedAt[i] = Date.now();
        return k;
      }))
    );
    assert.deepEqual(keys, [key, key]);
    assert.equal(calls, 1, 'migrate ran exactly once');
    assert.ok(migrated !== null);
    for (const at of resolvedAt) assert.ok(at >= migrated, `resolved ${migrated - at} ms before the migrator finished`);
    assert.ok(Math.min(...resolvedAt) - started >= 450, 'the waiter waited for the builder');
    assert.equal((await larder.buildInfo(key)).state, 'ready');

    const store = await clients[1].createStore({ build: key });
    assert.equal(store.info.counts.artists, 3);
    await store.delete();
    await larder.discardBuild(key);
  });

  test('a migrator that throws: the build is discarded, the error propagates, the next build() builds again', async () => {
    const key = newKey();
    const failure = new Error('migration 0002_artworks failed');
    await assert.rejects(
      larder.build(key, async (path) => {
        sqlite(path, 'CREATE TABLE half_done (x INTEGER)');
        throw failure;
      }),
      (err) => err === failure
    );
    await assert.rejects(larder.buildInfo(key), (err) => {
      assert.ok(err instanceof LarderError);
      assert.equal(err.status, 404);
      assert.equal(err.code, 'unknown_build');
      return true;
    });
    assert.ok(!(await larder.builds()).some((b) => b.key === key));

    // A synchronous migrator that throws, the same.
    const syncFailure = new TypeError('not a migration');
    await assert.rejects(larder.build(key, () => { throw syncFailure; }), (err) => err === syncFailure);
    await assert.rejects(larder.buildInfo(key), { status: 404, code: 'unknown_build' });

    // The next one starts from an empty file again.
    const m = migrator();
    assert.equal(await larder.build(key, m.migrate), key);
    assert.equal(m.calls, 1);
    const info = await larder.buildInfo(key);
    assert.equal(info.state, 'ready');
    assert.ok(!('half_done' in info.counts), `no half_done in ${JSON.stringify(info.counts)}`);
    assert.equal(info.counts.artists, 3);
    await larder.discardBuild(key);
  });

  test('a waiter whose builder fails becomes the builder', async () => {
    const key = newKey();
    const builder = new Larder({ url: server.url });
    const waiter = new Larder({ url: server.url });
    let builderStarted;
    const started = new Promise((r) => { builderStarted = r; });
    let failedAt = null;
    const failing = builder.build(key, async () => {
      builderStarted();
      await sleep(500);
      failedAt = Date.now();
      throw new Error('the first migrator fails');
    });
    failing.catch(() => {}); // awaited below
    await started;
    assert.equal((await larder.buildInfo(key)).state, 'building');

    let waiterMigratedAt = null;
    const m = migrator();
    const waiting = waiter.build(key, async (path) => {
      waiterMigratedAt = Date.now();
      await m.migrate(path);
    });
    await assert.rejects(failing, /the first migrator fails/);
    assert.equal(await waiting, key);
    assert.equal(m.calls, 1, 'the waiter built it');
    assert.ok(waiterMigratedAt >= failedAt, 'only after the first builder failed');
    const info = await larder.buildInfo(key);
    assert.equal(info.state, 'ready');
    assert.equal(info.counts.artists, 3);
    await larder.discardBuild(key);
  });

  test('waiting for a build runs out: build() and createStore() reject with LarderTimeout', async () => {
    const key = newKey();
    let release;
    const gate = new Promise((r) => { release = r; });
    let builderStarted;
    const started = new Promise((r) => { builderStarted = r; });
    const building = larder.build(key, async (path) => {
      builderStarted();
      await gate;
      sqlite(path, MIGRATIONS);
    });
    building.catch(() => {});
    let pending;
    try {
      await started;

      const other = new Larder({ url: server.url });
      let calls = 0;
      const t0 = Date.now();
      const err = await other.build(key, () => { calls += 1; }, { timeoutMs: 300 }).then(
        () => assert.fail('build() should time out'),
        (e) => e
      );
      assert.ok(err instanceof LarderTimeout, `a LarderTimeout, got ${err?.name}: ${err?.message}`);
      assert.equal(err.status, 408);
      assert.equal(err.code, 'timeout');
      assert.match(err.message, new RegExp(key));
      assert.ok(Date.now() - t0 >= 250);
      assert.equal(calls, 0);

      await assert.rejects(larder.createStore({ build: key, timeoutMs: 200 }), (e) => {
        assert.ok(e instanceof LarderTimeout, `a LarderTimeout, got ${e?.name}: ${e?.message}`);
        assert.equal(e.status, 408);
        assert.equal(e.code, 'timeout');
        return true;
      });

      // A store asked for meanwhile comes once the build is ready.
      pending = larder.createStore({ build: key, timeoutMs: 10_000 });
      pending.catch(() => {});
      await sleep(200);
    } finally {
      release();
    }
    assert.equal(await building, key);
    const store = await pending;
    assert.equal(store.info.build, key);
    assert.equal(store.info.counts.artists, 3);
    await store.delete();
    await larder.discardBuild(key);
  });

  test('a build still held by a write transaction is refused (409) and discarded', async () => {
    const key = newKey();
    let holder;
    try {
      await assert.rejects(
        larder.build(key, async (path) => {
          sqlite(path, 'CREATE TABLE t (x INTEGER)');
          // A connection the migrator forgot to close, in a write transaction.
          holder = spawn('sqlite3', [path], { stdio: ['pipe', 'ignore', 'ignore'] });
          holder.stdin.write('.timeout 5000\nBEGIN IMMEDIATE;\nINSERT INTO t VALUES (1);\n');
          for (let i = 0; ; i++) {
            try {
              sqlite(path, 'BEGIN IMMEDIATE; ROLLBACK;');
            } catch {
              break; // locked: the holder has its write transaction
            }
            if (i > 100) throw new Error('the holder never took the write lock');
            await sleep(50);
          }
        }),
        (err) => {
          assert.ok(err instanceof LarderError);
          assert.equal(err.status, 409);
          assert.equal(err.code, 'conflict');
          return true;
        }
      );
      await assert.rejects(larder.buildInfo(key), { status: 404, code: 'unknown_build' });
    } finally {
      if (holder) {
        const exited = new Promise((r) => holder.once('exit', r));
        holder.stdin.end();
        if (holder.exitCode === null && holder.signalCode === null) await exited;
      }
    }
  });

  test('unknown builds and bad keys are refused', async () => {
    await assert.rejects(larder.createStore({ build: `no-such-${randomUUID()}` }), (err) => {
      assert.ok(err instanceof LarderError);
      assert.ok(!(err instanceof LarderTimeout));
      assert.equal(err.status, 404);
      assert.equal(err.code, 'unknown_build');
      return true;
    });
    let called = false;
    await assert.rejects(larder.build('bad key!', () => { called = true; }), { name: 'LarderError', status: 400, code: 'bad_request' });
    assert.equal(called, false);
    await assert.rejects(larder.buildInfo('no-such-build'), { status: 404, code: 'unknown_build' });
    await assert.rejects(larder.discardBuild('no-such-build'), { status: 404, code: 'unknown_build' });
    await assert.rejects(larder.build(newKey()), TypeError);
    await assert.rejects(larder.createStore({ build: newKey(), template: 'gallery' }), { status: 400, code: 'bad_request' });
  });

  test('withStore gives a test a store of a build', async (t) => {
    const key = await larder.build(newKey(), migrator().migrate);
    const store = await withStore(t, { larder, build: key, timeoutMs: 5_000 });
    t.after(() => larder.discardBuild(key));
    assert.equal(store.info.build, key);
    // RUN/PACKAGE/TEST: this file relative to the working directory (test.sh
    // runs in clients/node), the describe's name and the test's.
    const run = runPrefix();
    assert.equal(store.info.label, `${run ? `${run}/` : ''}test/build.test.js/app-built templates > withStore gives a test a store of a build`);
    assert.equal(store.info.counts.artworks, 2);
  });
});
