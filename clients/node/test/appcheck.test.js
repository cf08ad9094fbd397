// Checking old databases that the application's own migrator migrates
// (POST /stores/{id}/check) against the real server: upload(), check(),
// checkSnapshot(), checkSnapshots() and the node:test helper testSnapshots().
// The app's migrator is played by test/appmigrator.js (SQL migrations run
// with the sqlite3 shell, versions kept in alembic_version); the reference
// is a build that the same migrator made.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { Larder, LarderError, formatCheckFailure, snapshotFiles } from 'larder-sqlite';
import { SnapshotCheckError, testSnapshots } from 'larder-sqlite/test';
import { MIGRATIONS, makeSnapshot, migrator, sqlite } from './appmigrator.js';
import { startServer } from './support.js';
import { RUN_VARIABLE_NAMES } from './project.js';

const here = dirname(fileURLToPath(import.meta.url));
const clientDir = resolve(here, '..');

const V1_DATA = "INSERT INTO notes (body, tag) VALUES ('a', 'x'), ('b', 'y'), ('c', NULL);";
const V2_DATA = "INSERT INTO notes (body, tag, pinned) VALUES ('d', 'z', 1), ('e', NULL, 0);";
const V1_EXPECT = { before: ['SELECT count(*) = 3 FROM notes'], counts: { notes: 3 }, assert: ['SELECT count(*) = 0 FROM notes WHERE pinned'] };

let server;
let larder;
let work;
let snapshots; // v1.sqlite (0001, with v1.expect.json) and v2.sqlite (0002)
const builds = {}; // good, lossy: keys of builds the same migrations made

before(async () => {
  server = await startServer();
  larder = new Larder({ url: server.url });
  work = mkdtempSync(join(tmpdir(), 'larder-node-appcheck-'));
  snapshots = join(work, 'snapshots');
  mkdirSync(snapshots);
  makeSnapshot(join(snapshots, 'v1.sqlite'), MIGRATIONS.good.slice(0, 1), V1_DATA);
  writeFileSync(join(snapshots, 'v1.expect.json'), JSON.stringify(V1_EXPECT));
  makeSnapshot(join(snapshots, 'v2.sqlite'), MIGRATIONS.good, V2_DATA);
  for (const kind of ['good', 'lossy']) {
    builds[kind] = await larder.build(`node-appcheck-${kind}-${randomUUID()}`, migrator(MIGRATIONS[kind]));
  }
});

after(async () => {
  if (work) rmSync(work, { recursive: true, force: true });
  await server?.stop();
});

const v1 = () => join(snapshots, 'v1.sqlite');

async function assertGone(id) {
  await assert.rejects(larder.getStore(id), { status: 404, code: 'store_not_found' });
}

async function assertKept(id) {
  const store = await larder.getStore(id);
  assert.equal(store.info.keep, true, `store ${id} is kept`);
  await store.delete();
}

describe('app migration checks', () => {
  test('upload() keeps the file as it is; check() answers passed and failed results alike', async () => {
    const store = await larder.upload(v1(), { label: 'node upload' });
    try {
      assert.equal(store.info.template, null);
      assert.equal(store.info.label, 'node upload');
      assert.deepEqual(store.info.counts, { notes: 3 }); // bookkeeping (alembic_version) is not counted

      migrator(MIGRATIONS.good)(store.path);
      const passed = await larder.check(store, { build: builds.good }, { snapshot: 'v1.sqlite', expect: V1_EXPECT });
      assert.equal(passed.passed, true, JSON.stringify(passed));
      assert.equal(passed.kind, 'app');
      assert.equal(passed.template, null);
      assert.equal(passed.snapshot, 'v1.sqlite');
      assert.equal(passed.from_version, '0001');
      assert.equal(passed.to_version, '0002');
      assert.deepEqual(passed.failures, []);

      // The same store against a template's schema: a 422, answered as a result.
      const failed = await store.check({ template: 'gallery', version: 'latest' });
      assert.equal(failed.passed, false);
      assert.ok(failed.failures.some((f) => f.startsWith('schema differs from the reference: ')), failed.failures.join('\n'));
      // ... and against itself (a store reference, as a Store).
      assert.equal((await larder.check(store.id, { store })).passed, true);
    } finally {
      await store.delete();
    }
  });

  test('what cannot be judged rejects with the LarderError', async () => {
    const store = await larder.upload(v1());
    const made = await larder.createStore({ template: 'gallery' });
    try {
      await assert.rejects(larder.check(store, { build: 'no-such-build' }), { status: 404, code: 'unknown_build' });
      await assert.rejects(larder.check(store, { template: 'no-such-template' }), { status: 404, code: 'unknown_template' });
      await assert.rejects(larder.check('st_nope', { build: builds.good }), { status: 404, code: 'store_not_found' });
      await assert.rejects(larder.check(made, { build: builds.good }), (err) => {
        assert.ok(err instanceof LarderError);
        assert.equal(err.status, 400);
        assert.equal(err.details.reason, 'not_an_upload');
        return true;
      });
      await assert.rejects(larder.check(store, { build: 'a', store: 'b' }), TypeError);
      await assert.rejects(larder.check(store, {}), TypeError);
      await assert.rejects(larder.check(store, { build: 'a' }, { colour: 'red' }), /unknown option 'colour'/);
    } finally {
      await store.delete();
      await made.delete();
    }
  });

  test('checkSnapshot: a correct migration passes, its expect.json read, and its store is deleted', async () => {
    const result = await larder.checkSnapshot(v1(), { build: builds.good, migrate: migrator(MIGRATIONS.good) });
    assert.equal(result.passed, true, result.failures.join('\n'));
    assert.equal(result.snapshot, 'v1.sqlite');
    assert.equal(result.from_version, '0001');
    assert.equal(result.to_version, '0002');
    assert.equal(result.kept, false);
    await assertGone(result.store);
  });

  test('checkSnapshots: every *.sqlite in file name order', async () => {
    assert.deepEqual(snapshotFiles(snapshots), ['v1.sqlite', 'v2.sqlite']);
    const results = await larder.checkSnapshots(snapshots, { build: builds.good, migrate: migrator(MIGRATIONS.good) });
    assert.deepEqual(results.map((r) => [r.snapshot, r.from_version, r.to_version, r.passed]), [
      ['v1.sqlite', '0001', '0002', true],
      ['v2.sqlite', '0002', '0002', true],
    ]);
    await assert.rejects(larder.checkSnapshots(snapshots, { build: builds.good, migrate() {}, expect: {} }), /per snapshot/);
  });

  test('a migration that drops a column holding data fails, naming it; the store is kept', async () => {
    const migrate = migrator(MIGRATIONS.lossy);
    const result = await larder.checkSnapshot(v1(), { build: builds.lossy, migrate });
    assert.equal(result.passed, false);
    // The build has no tag column either: only the data rule catches it.
    assert.deepEqual(result.failures, ['notes.tag held 2 non-NULL values; the migrated store has no column tag']);
    assert.equal(result.kept, true);
    await assertKept(result.store);

    const unchecked = await larder.checkSnapshot(v1(), { build: builds.lossy, migrate, data: false });
    assert.equal(unchecked.passed, true, unchecked.failures.join('\n'));
    await assertGone(unchecked.store);
  });

  test('a migration that leaves an index behind fails, naming the index', async () => {
    const result = await larder.checkSnapshot(v1(), { build: builds.good, migrate: migrator(MIGRATIONS.forgetful) });
    assert.equal(result.passed, false);
    assert.equal(result.failures.length, 1, result.failures.join('\n'));
    assert.match(result.failures[0], /^schema differs from the reference: index notes_tag on notes /);
    await assertKept(result.store);
  });

  test('a false before fails, naming it', async () => {
    const result = await larder.checkSnapshot(v1(), {
      build: builds.good,
      migrate: migrator(MIGRATIONS.good),
      expect: { before: ['SELECT count(*) = 5 FROM notes'] },
    });
    assert.equal(result.passed, false);
    assert.deepEqual(result.failures, ['before is false (got 0): SELECT count(*) = 5 FROM notes']);
    await assertKept(result.store);
  });

  test('a migrator that throws rejects, naming the snapshot and the kept store', async () => {
    let id;
    await assert.rejects(
      larder.checkSnapshot(v1(), {
        build: builds.good,
        migrate: () => sqlite(v1() + '.missing/x.sqlite', 'SELECT 1'),
      }),
      (err) => {
        const m = /^v1\.sqlite: the migrator failed on store (st_\w+) \(kept\): /.exec(err.message);
        assert.ok(m, err.message);
        assert.ok(err.cause);
        id = m[1];
        return true;
      }
    );
    await assertKept(id);
    await assert.rejects(larder.checkSnapshot(v1(), { build: builds.good }), TypeError);
    await assert.rejects(larder.checkSnapshot(v1(), { migrate() {} }), /exactly one of/);
  });

  test('formatCheckFailure: snapshot, versions, kept store, one failure a line', () => {
    const text = formatCheckFailure({
      snapshot: 'v1.sqlite', from_version: '0001', to_version: null, passed: false,
      failures: ['one', 'two'], store: 'st_1', kept: true,
    });
    assert.equal(text, 'v1.sqlite (0001 → ?) failed the migration check; store st_1 is kept:\n  one\n  two');
    assert.equal(new SnapshotCheckError({ snapshot: 'x', failures: ['f'] }).message, 'x (? → ?) failed the migration check:\n  f');
  });

  test('testSnapshots refuses a directory without snapshots and options it cannot use', () => {
    const empty = mkdtempSync(join(work, 'empty-'));
    assert.throws(() => testSnapshots(empty, { build: 'k', migrate() {} }), /no \*\.sqlite file in/);
    assert.throws(() => testSnapshots(snapshots, { build: 'k' }), TypeError);
    assert.throws(() => testSnapshots(snapshots, { build: 'k', migrate() {}, expect: {} }), /per snapshot/);
  });

  test('testSnapshots in a node --test run: one test per snapshot, a failure lists every message', async () => {
    // v1.sqlite fails twice over: the migrator leaves the old index behind,
    // and its expect.json's before is false. v2.sqlite passes.
    const dir = join(work, 'framework');
    mkdirSync(dir);
    makeSnapshot(join(dir, 'v1.sqlite'), MIGRATIONS.good.slice(0, 1), V1_DATA);
    writeFileSync(join(dir, 'v1.expect.json'), JSON.stringify({ before: ['SELECT count(*) = 5 FROM notes'] }));
    makeSnapshot(join(dir, 'v2.sqlite'), MIGRATIONS.good, V2_DATA);

    const project = join(work, 'project');
    mkdirSync(join(project, 'node_modules'), { recursive: true });
    symlinkSync(clientDir, join(project, 'node_modules', 'larder-sqlite'), 'dir');
    writeFileSync(join(project, 'migrations.test.mjs'), `
import { testSnapshots } from 'larder-sqlite/test';
import { MIGRATIONS, migrator } from ${JSON.stringify(pathToFileURL(join(here, 'appmigrator.js')).href)};

testSnapshots(process.env.SAMPLE_SNAPSHOTS, { build: process.env.SAMPLE_BUILD, migrate: migrator(MIGRATIONS.forgetful) });
`);
    const env = { ...process.env, LARDER_URL: server.url, SAMPLE_SNAPSHOTS: dir, SAMPLE_BUILD: builds.good };
    delete env.LARDER_TOKEN;
    delete env.NODE_TEST_CONTEXT; // set in a test run; the child runs tests of its own
    for (const name of RUN_VARIABLE_NAMES) delete env[name];
    const runId = `node-snapshots-${randomUUID()}`;
    env.LARDER_RUN = runId;
    const run = await new Promise((resolvePromise) => {
      execFile(process.execPath, ['--test', '--test-reporter=spec', 'migrations.test.mjs'], { cwd: project, env, timeout: 60_000 },
        (error, stdout, stderr) => resolvePromise({ code: error ? error.code : 0, stdout, stderr }));
    });
    const output = `exit ${run.code}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}`;
    if (process.env.LARDER_SHOW_SAMPLE) console.log(output);
    assert.equal(run.code, 1, output);
    assert.match(run.stdout, /✔ v2\.sqlite/, output);
    assert.match(run.stdout, /✖ v1\.sqlite/, output);
    const m = /v1\.sqlite \(0001 → 0002\) failed the migration check; store (st_\w+) is kept:\n\s*(.*)\n\s*(.*)\n/.exec(run.stdout);
    assert.ok(m, output);
    const lines = [m[2], m[3]].sort();
    assert.equal(lines[0], 'before is false (got 0): SELECT count(*) = 5 FROM notes', output);
    assert.match(lines[1], /^schema differs from the reference: index notes_tag on notes /, output);
    // The snapshot's store is labelled as a test's: RUN/PACKAGE/TEST.
    assert.equal((await larder.getStore(m[1])).info.label, `${runId}/migrations.test.mjs/v1.sqlite`);
    await assertKept(m[1]);
  });
});
