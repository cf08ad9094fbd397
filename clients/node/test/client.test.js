// The client against the real server: real HTTP, no mocks.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Larder, LarderError, LarderTimeout, Store } from 'larder-sqlite';
import { startServer, zipNames } from './support.js';

let server;
let larder;

before(async () => {
  server = await startServer();
  larder = new Larder({ url: server.url });
});

after(async () => {
  await server?.stop();
});

describe('Larder client', () => {
  test('defaults come from LARDER_URL and LARDER_TOKEN', () => {
    const saved = { url: process.env.LARDER_URL, token: process.env.LARDER_TOKEN };
    try {
      delete process.env.LARDER_URL;
      delete process.env.LARDER_TOKEN;
      const plain = new Larder();
      assert.equal(plain.url, 'http://127.0.0.1:7464');
      assert.equal(plain.token, null);
      process.env.LARDER_URL = 'http://127.0.0.1:9999/';
      process.env.LARDER_TOKEN = 's3cret';
      const fromEnv = new Larder();
      assert.equal(fromEnv.url, 'http://127.0.0.1:9999');
      assert.equal(fromEnv.token, 's3cret');
    } finally {
      for (const [k, v] of [['LARDER_URL', saved.url], ['LARDER_TOKEN', saved.token]]) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });

  test('creates a store from a template with fixtures', async () => {
    const store = await larder.createStore({ template: 'gallery', fixtures: ['artists', 'artworks'], label: 'node create' });
    try {
      assert.ok(store instanceof Store);
      assert.match(store.id, /^[A-Za-z0-9_-]+$/);
      assert.ok(existsSync(store.path), `path ${store.path} exists`);
      assert.equal(store.info.template, 'gallery');
      assert.equal(store.info.version, '6');
      assert.equal(store.info.label, 'node create');
      assert.equal(store.info.counts.artists, 4);
      assert.equal(store.info.counts.artworks, 12);
      assert.deepEqual(await store.counts({ tables: ['artists', 'artworks'] }), { artists: 4, artworks: 12 });
      const all = await store.counts();
      assert.equal(all.albums, 0);
      assert.equal(all.partners, 0);
    } finally {
      await store.delete();
    }
  });

  test('writes through query and load', async () => {
    const store = await larder.createStore({ template: 'gallery', fixtures: ['artists'] });
    try {
      const insert = await store.query('INSERT INTO artworks (id, artist_id, title, year) VALUES (?, ?, ?, ?)', [100, 1, 'Study', 1910]);
      assert.equal(insert.changes, 1);
      const read = await store.query('SELECT title, year FROM artworks WHERE id = ?', [100]);
      assert.deepEqual(read.columns, ['title', 'year']);
      assert.deepEqual(read.rows, [['Study', 1910]]);

      const rows = await store.load({ rows: { albums: [{ id: 1, title: 'Highlights' }], album_artworks: [{ album_id: 1, artwork_id: 100 }] } });
      assert.equal(rows.counts.albums, 1);
      assert.equal(rows.counts.album_artworks, 1);

      const sql = await store.load({ sql: "INSERT INTO partners (name) VALUES ('Tate'); INSERT INTO partners (name) VALUES ('Moma');" });
      assert.equal(sql.counts.partners, 2);

      const named = await store.load({ fixtures: ['artworks'] });
      assert.equal(named.counts.artworks, 13);

      assert.deepEqual(await store.counts({ tables: 'artworks,partners' }), { artworks: 13, partners: 2 });

      const migrated = await store.migrate();
      assert.equal(migrated.to, '6');
      assert.deepEqual(migrated.applied, []);
    } finally {
      await store.delete();
    }
  });

  test('reset brings a store back in place; a fork starts from a live store', async () => {
    const store = await larder.createStore({ template: 'gallery', fixtures: ['artists', 'artworks'] });
    let fork;
    try {
      const path = store.path;
      await store.query('DELETE FROM artworks');
      await store.load({ fixtures: ['albums'] });
      assert.equal(await store.reset(), store.info);
      assert.equal(store.path, path);
      assert.deepEqual(store.info.fixtures, ['artists', 'artworks']);
      assert.equal(store.info.counts.artworks, 12);
      assert.deepEqual(await store.counts({ tables: 'artworks,albums' }), { artworks: 12, albums: 0 });

      await store.query("INSERT INTO artists (name) VALUES ('Sonia Delaunay')");
      fork = await larder.createStore({ from: store.id, fixtures: ['albums'], label: 'node fork' });
      assert.notEqual(fork.id, store.id);
      assert.equal(fork.info.counts.artists, 5);
      assert.ok(fork.info.counts.albums > 0);
      assert.deepEqual(fork.info.fixtures, ['artists', 'artworks', 'albums']);
      assert.deepEqual((await fork.diff()).tables, {}, 'a fork is its own base, its fixtures included');
      await fork.query('DELETE FROM artists WHERE id > 1');
      await fork.reset();
      assert.equal(fork.info.counts.artists, 5);

      await assert.rejects(larder.createStore({ from: store.id, template: 'gallery' }),
        (e) => e instanceof LarderError && e.status === 400 && e.code === 'bad_request');
      await assert.rejects(larder.createStore({ from: 'st_nothere' }),
        (e) => e instanceof LarderError && e.status === 404 && e.code === 'store_not_found');
    } finally {
      await fork?.delete();
      await store.delete();
    }
  });

  test('diff reports what a test changed, by key, with old and new rows', async () => {
    const store = await larder.createStore({ template: 'gallery', fixtures: ['artists'] });
    try {
      const unchanged = await store.diff();
      assert.match(unchanged.base, /gallery/);
      assert.deepEqual(unchanged.schema, { added: [], removed: [], changed: [] });
      assert.deepEqual(unchanged.tables, {});

      await store.query('INSERT INTO artists (id, name, born) VALUES (?, ?, ?)', [100, 'Sonia Delaunay', 1885]);
      await store.query('UPDATE artists SET born = ? WHERE id = ?', [1863, 1]);
      await store.query('DELETE FROM artists WHERE id = ?', [4]);
      await store.query('INSERT INTO albums (id, title, created_at) VALUES (?, ?, ?)', [7, 'Blue', '2024-06-01T00:00:00Z']);

      const diff = await store.diff();
      assert.deepEqual(diff.schema, { added: [], removed: [], changed: [] });
      assert.deepEqual(Object.keys(diff.tables).sort(), ['albums', 'artists']);
      const artists = diff.tables.artists;
      assert.deepEqual([artists.inserted, artists.updated, artists.deleted, artists.truncated], [1, 1, 1, false]);
      const byOp = Object.fromEntries(artists.rows.map((row) => [row.op, row]));
      assert.equal(artists.rows.length, 3);
      assert.deepEqual(byOp.insert, {
        op: 'insert', key: { id: 100 }, old: null,
        new: { id: 100, name: 'Sonia Delaunay', born: 1885, country: '' },
      });
      assert.deepEqual(byOp.update, {
        op: 'update', key: { id: 1 },
        old: { id: 1, name: 'Hilma af Klint', born: 1862, country: '' },
        new: { id: 1, name: 'Hilma af Klint', born: 1863, country: '' },
      });
      assert.deepEqual(byOp.delete, {
        op: 'delete', key: { id: 4 },
        old: { id: 4, name: 'Agnes Martin', born: 1912, country: '' }, new: null,
      });
      assert.deepEqual(diff.tables.albums.rows, [
        { op: 'insert', key: { id: 7 }, old: null, new: { id: 7, title: 'Blue', created_at: '2024-06-01T00:00:00Z' } },
      ]);

      // limit cuts the rows listed, not the counts
      const one = (await store.diff({ limit: 1 })).tables;
      assert.equal(one.artists.rows.length, 1);
      assert.equal(one.artists.truncated, true);
      assert.deepEqual([one.artists.inserted, one.artists.updated, one.artists.deleted], [1, 1, 1]);
      assert.equal(one.albums.truncated, false);
      const countsOnly = (await store.diff({ limit: 0 })).tables;
      assert.deepEqual(countsOnly.artists.rows, []);
      assert.equal(countsOnly.artists.deleted, 1);

      // tables narrows: an array or "a,b"
      assert.deepEqual(Object.keys((await store.diff({ tables: ['albums'] })).tables), ['albums']);
      const narrowed = (await store.diff({ tables: 'artists', limit: 2 })).tables;
      assert.deepEqual(Object.keys(narrowed), ['artists']);
      assert.equal(narrowed.artists.rows.length, 2);

      // a blob comes as {base64}
      await store.query('UPDATE artists SET name = ? WHERE id = ?', [{ base64: 'AP8Q' }, 2]);
      const [blobRow] = (await store.diff({ tables: ['artists'] })).tables.artists.rows.filter((row) => row.key.id === 2);
      assert.deepEqual(blobRow.new.name, { base64: 'AP8Q' });
      assert.equal(blobRow.old.name, 'Katsushika Hokusai');

      await assert.rejects(store.diff({ tables: ['artists', 'no_such_table'] }), (e) => {
        assert.ok(e instanceof LarderError);
        assert.equal(e.status, 400);
        assert.equal(e.code, 'bad_request');
        assert.match(e.message, /no_such_table/);
        return true;
      });
      await assert.rejects(store.diff({ limit: 10_001 }), { name: 'LarderError', status: 400, code: 'bad_request' });

      await store.reset();
      assert.deepEqual((await store.diff()).tables, {});
    } finally {
      await store.delete();
    }
    await assert.rejects(store.diff(), { name: 'LarderError', status: 404, code: 'store_not_found' });
  });

  test('a wait is released by a write made meanwhile', async () => {
    const store = await larder.createStore({ template: 'gallery', fixtures: ['artists', 'artworks'] });
    try {
      const started = Date.now();
      let writer;
      const timer = setTimeout(() => {
        writer = store.query("INSERT INTO artworks (artist_id, title) VALUES (1, 'Late arrival')");
      }, 300);
      const counts = await store.wait('artworks>=13', { timeoutMs: 10_000 });
      const elapsed = Date.now() - started;
      clearTimeout(timer);
      assert.equal((await writer).changes, 1);
      assert.equal(counts.artworks, 13);
      assert.ok(elapsed >= 250, `released only after the write (${elapsed} ms)`);
      assert.ok(elapsed < 8_000, `released by the write, not the timeout (${elapsed} ms)`);
    } finally {
      await store.delete();
    }
  });

  test('a wait that cannot hold rejects with LarderTimeout and the last counts', async () => {
    const store = await larder.createStore({ template: 'gallery', fixtures: ['artists', 'artworks'] });
    try {
      const started = Date.now();
      const err = await store.wait('artworks>=100', { timeoutMs: 400 }).then(
        () => assert.fail('the wait should time out'),
        (e) => e
      );
      assert.ok(err instanceof LarderTimeout, `a LarderTimeout, got ${err?.name}: ${err?.message}`);
      assert.ok(err instanceof LarderError);
      assert.equal(err.name, 'LarderTimeout');
      assert.equal(err.status, 408);
      assert.equal(err.code, 'timeout');
      assert.equal(err.counts.artworks, 12);
      assert.equal(err.details.counts.artists, 4);
      assert.ok(Date.now() - started >= 350);
    } finally {
      await store.delete();
    }
  });

  test('errors carry status, code, message and details', async () => {
    await assert.rejects(larder.createStore({ template: 'no_such_template' }), (err) => {
      assert.ok(err instanceof LarderError);
      assert.ok(!(err instanceof LarderTimeout));
      assert.equal(err.status, 404);
      assert.equal(err.code, 'unknown_template');
      assert.match(err.message, /no_such_template/);
      assert.equal(err.details.template, 'no_such_template');
      assert.ok(err.requestId, 'X-Request-Id is kept');
      return true;
    });

    const store = await larder.createStore({ template: 'gallery' });
    await assert.rejects(store.query('SELECT * FROM no_such_table'), { status: 422, code: 'sql_error' });
    await assert.rejects(store.query('ATTACH DATABASE ? AS other', ['/tmp/x.sqlite']), { status: 403, code: 'forbidden_sql' });
    await assert.rejects(store.load({ fixtures: ['nope'] }), { status: 404, code: 'unknown_fixture' });
    await store.delete();
    await assert.rejects(store.counts(), { name: 'LarderError', status: 404, code: 'store_not_found' });
    await assert.rejects(store.delete(), { status: 404, code: 'store_not_found' });
  });

  test('options the client does not know are refused before sending', async () => {
    await assert.rejects(larder.createStore({ templat: 'gallery' }), TypeError);
    await assert.rejects(
      (async () => new Store(larder, { id: 'st_x' }).load({ row: {} }))(),
      TypeError
    );
  });

  test('an unreachable server is a LarderError with status 0', async () => {
    const nowhere = new Larder({ url: 'http://127.0.0.1:1' });
    await assert.rejects(nowhere.health(), { name: 'LarderError', status: 0, code: 'connection_failed' });
  });

  test('the token goes as a bearer token', async () => {
    const guarded = await startServer(['--token', 's3cret-token']);
    const saved = process.env.LARDER_TOKEN;
    try {
      await assert.rejects(new Larder({ url: guarded.url }).createStore({ template: 'gallery' }), {
        status: 401,
        code: 'unauthorized',
      });
      process.env.LARDER_TOKEN = 's3cret-token';
      const store = await new Larder({ url: guarded.url }).createStore({ template: 'gallery', fixtures: ['artists'] });
      assert.equal((await store.counts({ tables: ['artists'] })).artists, 4);
      await store.delete();
    } finally {
      if (saved === undefined) delete process.env.LARDER_TOKEN;
      else process.env.LARDER_TOKEN = saved;
      await guarded.stop();
    }
  });

  test('keep, refresh, getStore and the artifact zip', async () => {
    const store = await larder.createStore({ template: 'gallery', fixtures: ['artists'], label: 'node artifact' });
    const dir = mkdtempSync(join(tmpdir(), 'larder-node-artifact-'));
    try {
      assert.equal(store.info.keep, false);
      const kept = await store.keep();
      assert.equal(kept.keep, true);
      assert.equal((await larder.getStore(store.id)).info.keep, true);
      assert.equal((await store.refresh()).keep, true);
      const listed = await larder.listStores({ label: 'node artifact' });
      assert.deepEqual(listed.map((s) => s.id), [store.id]);

      const file = await store.artifact(join(dir, 'nested', 'store.zip'));
      assert.equal(file, join(dir, 'nested', 'store.zip'));
      const names = zipNames(file);
      assert.ok(names.includes('store.sqlite'), `store.sqlite in ${names}`);
      assert.ok(names.includes('manifest.json'), `manifest.json in ${names}`);
      // Its creation state too: `larder open` shows what the test changed.
      assert.ok(names.includes('base.sqlite'), `base.sqlite in ${names}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await store.delete();
    }
  });
});
