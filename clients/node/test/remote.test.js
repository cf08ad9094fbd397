// Remote mode (issue 47) against a server whose files this process cannot see: the real server
// run through Tests/support/hidden-larder, so a store's `info.path` does not exist here and every
// byte goes over HTTP. The test's own SQLite writer is the `sqlite3` shell (test/appmigrator.js).

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { Larder, LarderError, Store, resolveMode } from 'larder-sqlite';
import { configure, defaultLarder, fileSafeName } from 'larder-sqlite/test';
import { MIGRATIONS, makeSnapshot, migrator, sqlite } from './appmigrator.js';
import { jsonLines, makeProject, runNode, sampleEnv } from './project.js';
import { startServer, zipNames } from './support.js';

const here = dirname(fileURLToPath(import.meta.url));

let server;
let larder; // remote mode
let inspector; // local mode, of the same server: looks without downloading
let work;

before(async () => {
  server = await startServer([], { hidden: true });
  larder = new Larder({ url: server.url, mode: 'remote' });
  inspector = new Larder({ url: server.url, mode: 'local' });
  work = mkdtempSync(join(tmpdir(), 'larder-node-remote-'));
});

after(async () => {
  if (work) rmSync(work, { recursive: true, force: true });
  await server?.stop();
});

/** One value of the local copy, read with the sqlite3 shell. */
const local = (store, sql) => sqlite(store.path, sql).trim();

/** Runs `fn` with the environment variables `vars` set (undefined: unset), then puts them back. */
async function withEnv(vars, fn) {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  const set = (values) => {
    for (const [k, v] of Object.entries(values)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
  set(vars);
  try {
    return await fn();
  } finally {
    set(saved);
  }
}

describe('remote mode', () => {
  test('the mode: the option, else LARDER_MODE, else remote for a host that is not loopback', async () => {
    await withEnv({ LARDER_MODE: undefined }, async () => {
      for (const url of ['http://127.0.0.1:7464', 'http://127.9.8.7:1', 'http://localhost:7464', 'http://LOCALHOST', 'http://[::1]:7464', 'http://127.1:80']) {
        assert.equal(new Larder({ url }).mode, 'local', url);
      }
      for (const url of ['http://10.0.0.7:7464', 'http://larder.ci.internal:7464', 'https://128.0.0.1', 'http://[::2]:7464', 'http://localhost.example.com']) {
        assert.equal(new Larder({ url }).mode, 'remote', url);
      }
      assert.equal(new Larder().mode, 'local', 'the default URL is loopback');
      assert.equal(new Larder({ url: 'http://10.0.0.7:7464', mode: 'local' }).mode, 'local', 'the option wins');
      assert.equal(resolveMode({ url: null }), 'local', 'a server the helper starts');
      assert.throws(() => new Larder({ mode: 'cloud' }), (err) => err instanceof TypeError && /'remote' or 'local'/.test(err.message));
    });
    await withEnv({ LARDER_MODE: 'remote' }, () => {
      assert.equal(new Larder({ url: 'http://127.0.0.1:7464' }).mode, 'remote');
      assert.equal(resolveMode({ url: null }), 'remote');
      assert.equal(new Larder({ mode: 'local' }).mode, 'local', 'the option beats the variable');
    });
    await withEnv({ LARDER_MODE: 'local' }, () => assert.equal(new Larder({ url: 'http://10.0.0.7:7464' }).mode, 'local'));
    await withEnv({ LARDER_MODE: '' }, () => assert.equal(new Larder({ url: 'http://10.0.0.7:7464' }).mode, 'remote', 'empty is unset'));
    await withEnv({ LARDER_MODE: 'Remote' }, async () => {
      const named = (err) => err instanceof LarderError && err.code === 'bad_mode' && /LARDER_MODE/.test(err.message) && /'remote' or 'local'/.test(err.message) && /"Remote"/.test(err.message);
      assert.throws(() => new Larder(), named);
      assert.equal(new Larder({ mode: 'remote' }).mode, 'remote', 'the option does not read the variable');
      // The helper says so before it would start a server (this binary does not exist).
      try {
        configure({ binary: join(work, 'no-such-larder') });
        await withEnv({ LARDER_URL: undefined }, () => assert.rejects(defaultLarder(), named));
        configure({ url: server.url });
        await assert.rejects(defaultLarder(), named);
        configure({ url: server.url, mode: 'remote' });
        assert.equal((await defaultLarder()).mode, 'remote');
      } finally {
        configure({});
      }
    });
    assert.throws(() => configure({ mode: 'cloud' }), TypeError);
    // Local mode: the server's file, nothing to hand back.
    const plain = new Store(inspector, { id: 'st_1', path: '/srv/larder/st_1/store.sqlite' });
    assert.equal(plain.remote, false);
    assert.equal(plain.path, '/srv/larder/st_1/store.sqlite');
    assert.equal(await plain.checkIn(), plain.info);
    await plain.close();
  });

  test('a store is a local copy: rows the test writes arrive with checkIn, and counts and diff see them', async () => {
    const store = await larder.createStore({ template: 'gallery', fixtures: ['artists'], label: 'node remote' });
    const dir = dirname(store.path);
    try {
      assert.equal(store.remote, true);
      assert.ok(!existsSync(store.info.path), `the server's ${store.info.path} is hidden from this process`);
      assert.notEqual(store.path, store.info.path);
      assert.equal(basename(store.path), 'store.sqlite');
      assert.match(basename(dir), /^larder-remote-/);
      assert.equal(dirname(dir), tmpdir());
      assert.equal(statSync(dir).mode & 0o777, 0o700);
      assert.equal(local(store, 'SELECT count(*) FROM artists'), '4');

      sqlite(store.path, "DELETE FROM artists WHERE id = 4; INSERT INTO artists (id, name, born) VALUES (100, 'Sonia Delaunay', 1885);");
      // The server sees what was last checked in.
      assert.deepEqual(await store.counts({ tables: ['artists'] }), { artists: 4 });
      assert.deepEqual((await store.diff()).tables, {});

      const info = await store.checkIn();
      assert.equal(info, store.info);
      assert.equal(info.id, store.id);
      assert.equal(info.counts.artists, 4);
      const diff = (await store.diff()).tables.artists;
      assert.deepEqual([diff.inserted, diff.updated, diff.deleted], [1, 0, 1]);
      assert.deepEqual(diff.rows.map((r) => [r.op, r.key.id]).sort(), [['delete', 4], ['insert', 100]]);
      assert.equal((await store.query('SELECT name FROM artists WHERE id = 100')).rows[0][0], 'Sonia Delaunay');

      await store.close();
      assert.ok(!existsSync(dir), 'close() removes the local folder');
      assert.deepEqual(await store.counts({ tables: ['artists'] }), { artists: 4 }, 'the store stays');
      await assert.rejects(store.checkIn(), { code: 'check_in_failed' });
    } finally {
      await store.delete();
    }
    assert.ok(!existsSync(dir));
    await assert.rejects(inspector.getStore(store.id), { status: 404 });
  });

  test('a copy left with a non-empty -wal is checked in as a zip, its last writes with it', async () => {
    const store = await larder.createStore({ template: 'gallery', fixtures: ['artists'] });
    const dir = dirname(store.path);
    try {
      // no_ckpt_on_close: the shell leaves its writes in the -wal when it exits.
      sqlite(store.path, "PRAGMA journal_mode=WAL;\n.dbconfig no_ckpt_on_close on\nINSERT INTO artists (name) VALUES ('Sonia Delaunay'), ('Leonora Carrington');\n");
      assert.ok(statSync(`${store.path}-wal`).size > 0, 'the -wal holds the writes');
      const alone = join(work, 'without-wal.sqlite');
      copyFileSync(store.path, alone);
      assert.equal(sqlite(alone, 'SELECT count(*) FROM artists').trim(), '4', 'the database file alone does not');

      await store.checkIn();
      assert.deepEqual(await store.counts({ tables: ['artists'] }), { artists: 6 });
      assert.equal((await store.diff()).tables.artists.inserted, 2);
      // Unchanged since: the next server-side change sends nothing again, and downloads afresh.
      await store.load({ rows: { partners: [{ name: 'Tate' }] } });
      assert.ok(!existsSync(`${store.path}-wal`), 'the stale -wal is gone');
      assert.equal(local(store, 'SELECT count(*) FROM artists'), '6');
      assert.equal(local(store, 'SELECT count(*) FROM partners'), '1');
    } finally {
      await store.delete();
    }
    assert.ok(!existsSync(dir), 'delete() removes the local folder');
  });

  test('load, migrate, query and reset: local changes go first, the local copy follows the server', async () => {
    const store = await larder.createStore({ template: 'gallery', version: '5', fixtures: ['artists'] });
    try {
      const inode = () => statSync(store.path).ino;
      const column = "SELECT count(*) FROM pragma_table_info('artworks') WHERE name = 'updated_at'";
      assert.equal(local(store, column), '0');

      sqlite(store.path, "INSERT INTO artists (id, name) VALUES (100, 'Sonia Delaunay');");
      const loaded = await store.load({ fixtures: ['artworks'] });
      assert.equal(loaded.counts.artists, 5, 'the local row was checked in before the load');
      assert.equal(local(store, 'SELECT count(*) FROM artworks'), '12', 'the load came back');
      assert.equal(local(store, 'SELECT count(*) FROM artists'), '5');

      sqlite(store.path, 'DELETE FROM artworks WHERE id > 10;');
      const migrated = await store.migrate();
      assert.deepEqual([migrated.from, migrated.to], ['5', '6']);
      assert.equal(local(store, column), '1', 'the migration came back');
      assert.equal(local(store, 'SELECT count(*) FROM artworks'), '10', 'and the local delete went first');
      const before = inode();
      assert.deepEqual((await store.migrate()).applied, []);
      assert.equal(inode(), before, 'nothing applied, nothing downloaded');

      // A query sees the local copy as it is; one that changes rows comes back.
      sqlite(store.path, "INSERT INTO partners (name) VALUES ('Tate');");
      assert.deepEqual((await store.query('SELECT count(*) FROM partners')).rows, [[1]]);
      const read = inode();
      await store.query('SELECT count(*) FROM artists');
      assert.equal(inode(), read, 'a read-only query downloads nothing');
      assert.equal((await store.query("UPDATE artists SET born = 1885 WHERE id = 100")).changes, 1);
      assert.notEqual(inode(), read);
      assert.equal(local(store, 'SELECT born FROM artists WHERE id = 100'), '1885');

      // Reset throws the local changes away with the server's.
      sqlite(store.path, 'DELETE FROM artists;');
      const reset = await store.reset();
      assert.equal(reset.version, '5');
      assert.equal(local(store, 'SELECT count(*) FROM artists'), '4');
      assert.equal(local(store, 'SELECT count(*) FROM artworks'), '0');
      assert.equal(local(store, column), '0');
      assert.deepEqual((await store.diff()).tables, {});
    } finally {
      await store.delete();
    }
  });

  test('getStore and upload come with a local copy; build() cannot build here and says so', async () => {
    const file = join(work, 'plain.sqlite');
    sqlite(file, 'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES (1), (2);');
    const uploaded = await larder.upload(file, { label: 'node remote upload' });
    const again = await larder.getStore(uploaded.id);
    try {
      assert.equal(uploaded.remote, true);
      assert.equal(again.remote, true);
      assert.notEqual(again.path, uploaded.path, 'each Store its own copy');
      assert.equal(local(again, 'SELECT count(*) FROM notes'), '2');
    } finally {
      await again.close();
      await uploaded.delete();
    }
    assert.ok(!existsSync(dirname(again.path)) && !existsSync(dirname(uploaded.path)));

    const key = `node-remote-${randomUUID()}`;
    let migrated = false;
    await assert.rejects(larder.build(key, () => { migrated = true; }), (err) => err instanceof LarderError && err.code === 'remote_mode' && /remote mode/.test(err.message));
    assert.equal(migrated, false);
    await assert.rejects(inspector.buildInfo(key), { status: 404, code: 'unknown_build' }, 'the build was given back');
  });

  test('checkSnapshot: the app migrator runs on a local copy, which is checked in before the check', async () => {
    const dir = join(work, 'snapshots');
    mkdirSync(dir);
    const v1 = join(dir, 'v1.sqlite');
    makeSnapshot(v1, MIGRATIONS.good.slice(0, 1), "INSERT INTO notes (body, tag) VALUES ('a', 'x'), ('b', 'y'), ('c', NULL);");
    // The reference: a fresh database the same migrator made, uploaded (build() needs the server's files).
    const fresh = join(work, 'fresh.sqlite');
    migrator(MIGRATIONS.good)(fresh);
    const reference = await larder.upload(fresh, { label: 'node remote reference' });
    await reference.close();
    try {
      const paths = [];
      const spy = (steps) => (path) => {
        paths.push(path);
        assert.ok(existsSync(path), 'the migrator gets a file it can open');
        return migrator(steps)(path);
      };
      const passed = await larder.checkSnapshot(v1, {
        store: reference,
        migrate: spy(MIGRATIONS.good),
        expect: { before: ['SELECT count(*) = 3 FROM notes'], counts: { notes: 3 }, assert: ['SELECT count(*) = 0 FROM notes WHERE pinned'] },
      });
      assert.equal(passed.passed, true, passed.failures.join('\n'));
      assert.deepEqual([passed.from_version, passed.to_version, passed.kept], ['0001', '0002', false]);
      await assert.rejects(inspector.getStore(passed.store), { status: 404 });

      const failed = await larder.checkSnapshot(v1, { store: reference, migrate: spy(MIGRATIONS.forgetful) });
      assert.equal(failed.passed, false);
      assert.equal(failed.kept, true);
      assert.equal(failed.failures.length, 1, failed.failures.join('\n'));
      assert.match(failed.failures[0], /^schema differs from the reference: index notes_tag on notes /);
      await (await inspector.getStore(failed.store)).delete();

      for (const path of paths) {
        assert.equal(basename(path), 'store.sqlite');
        assert.match(basename(dirname(path)), /^larder-remote-/);
        assert.ok(!existsSync(dirname(path)), 'the local folder is gone');
      }
      assert.equal(paths.length, 2);
    } finally {
      await reference.delete();
    }
  });

  test('the helper in a node --test run: a failed test is checked in, kept and saved; a passed one leaves nothing', async () => {
    const runId = `node-remote-${randomUUID()}`;
    const project = join(work, 'project');
    const temp = join(work, 'tmp'); // the sample's TMPDIR: its local copies go there
    mkdirSync(temp);
    makeProject(project, {
      files: {
        'remote.test.mjs': `
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, existsSync, writeFileSync } from 'node:fs';
import { withStore } from 'larder-sqlite/test';
import { sqlite } from ${JSON.stringify(pathToFileURL(join(here, 'appmigrator.js')).href)};

const record = (t, store) => appendFileSync(process.env.SAMPLE_IDS,
  JSON.stringify({ name: t.name, id: store.id, path: store.path, remote: store.remote, hidden: !existsSync(store.info.path) }) + '\\n');

test('passes', async (t) => {
  const store = await withStore(t, { template: 'gallery', fixtures: ['artists'] });
  record(t, store);
  sqlite(store.path, "INSERT INTO artists (name) VALUES ('Hilma af Klint');");
  await store.checkIn();
  assert.equal((await store.counts({ tables: ['artists'] })).artists, 5);
});

test('fails', async (t) => {
  const store = await withStore(t, { template: 'gallery', fixtures: ['artists'] });
  record(t, store);
  sqlite(store.path, "DELETE FROM artists WHERE id = 4; INSERT INTO artists (id, name) VALUES (100, 'Sonia Delaunay');");
  assert.fail('deliberately failing');
});

test('fails with a copy that cannot be checked in', async (t) => {
  const store = await withStore(t, { template: 'gallery', fixtures: ['artists'] });
  record(t, store);
  writeFileSync(store.path, 'not a database');
  assert.fail('deliberately failing');
});
`,
      },
    });
    const ids = join(project, 'ids.jsonl');
    const run = await runNode(
      project,
      ['--test', '--test-reporter=spec', 'remote.test.mjs'],
      sampleEnv({ LARDER_URL: server.url, LARDER_MODE: 'remote', LARDER_RUN: runId, SAMPLE_IDS: ids, TMPDIR: temp })
    );
    const { output } = run;
    if (process.env.LARDER_SHOW_SAMPLE) console.log(output);
    assert.equal(run.code, 1, output);
    const tests = Object.fromEntries(jsonLines(ids).map((e) => [e.name, e]));
    assert.deepEqual(Object.keys(tests).sort(), ['fails', 'fails with a copy that cannot be checked in', 'passes'], output);
    for (const entry of Object.values(tests)) {
      assert.equal(entry.remote, true, output);
      assert.equal(entry.hidden, true, `the server's path is hidden from the sample too\n${output}`);
      assert.ok(entry.path.startsWith(temp + '/'), entry.path);
    }
    assert.deepEqual(readdirSync(temp), [], `no local copy is left\n${output}`);

    // Passed: no store left, no upload needed.
    const listed = await inspector.request('GET', '/stores', { query: { label_prefix: `${runId}/remote.test.mjs/passes` } });
    assert.deepEqual(listed.stores, [], output);
    await assert.rejects(inspector.getStore(tests.passes.id), { status: 404 });

    // Failed: the test's changes were checked in, the store kept, the artifact holds them.
    const artifacts = join(project, 'larder-artifacts');
    const failed = await inspector.getStore(tests.fails.id);
    assert.equal(failed.info.keep, true, output);
    const diff = (await failed.diff()).tables.artists;
    assert.deepEqual(diff.rows.map((r) => [r.op, r.key.id]).sort(), [['delete', 4], ['insert', 100]], output);
    const zip = join(artifacts, `${fileSafeName('fails')}-${failed.id}.zip`);
    assert.ok(zipNames(zip).includes('store.sqlite'), output);
    const ids100 = execFileSync('python3', ['-c', [
      'import os, sqlite3, sys, tempfile, zipfile',
      'with tempfile.TemporaryDirectory() as d:',
      '    zipfile.ZipFile(sys.argv[1]).extract("store.sqlite", d)',
      '    db = sqlite3.connect(os.path.join(d, "store.sqlite"))',
      '    print(",".join(str(r[0]) for r in db.execute("SELECT id FROM artists ORDER BY id")))',
      '    db.close()',
    ].join('\n'), zip], { encoding: 'utf8' }).trim();
    assert.equal(ids100, '1,2,3,100');
    assert.match(run.stdout, new RegExp(`store ${failed.id} of the failed test is kept`), output);

    // A check-in that fails is said, and the store is kept and saved as last checked in.
    const torn = await inspector.getStore(tests['fails with a copy that cannot be checked in'].id);
    assert.equal(torn.info.keep, true, output);
    assert.match(run.stdout, new RegExp(`the check-in of store ${torn.id}'s local copy failed`), output);
    assert.ok(existsSync(join(artifacts, `${fileSafeName('fails with a copy that cannot be checked in')}-${torn.id}.zip`)), output);
    assert.deepEqual((await torn.diff()).tables, {});

    const { deleted } = await inspector.request('DELETE', '/stores', { query: { label_prefix: `${runId}/` } });
    assert.equal(deleted, 2);
  });
});
