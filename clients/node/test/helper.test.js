// The node:test helper (larder-sqlite/test): a sample test file with passing and
// failing tests runs under `node --test` in a subprocess; afterwards the
// failed tests' stores are kept with their artifacts saved, the passing
// tests' stores are gone.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { Larder } from 'larder-sqlite';
import { fileSafeName, withStore } from 'larder-sqlite/test';
import { startServer, zipNames } from './support.js';

const clientDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');

// The sample, as a user would write it: it imports the installed package
// by name (node_modules/larder-sqlite links to this client).
const SAMPLE = `
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync } from 'node:fs';
import { withStore, test as larderTest } from 'larder-sqlite/test';

const record = (t, store) =>
  appendFileSync(process.env.SAMPLE_IDS, JSON.stringify({ name: t.name, id: store.id }) + '\\n');

test('passing test', async (t) => {
  const store = await withStore(t, { template: 'gallery', fixtures: ['artists'] });
  record(t, store);
  await store.query("INSERT INTO artists (name) VALUES ('Hilma af Klint')");
  assert.equal((await store.counts({ tables: ['artists'] })).artists, 5);
});

test('failing test: counts/wrong', async (t) => {
  const store = await withStore(t, { template: 'gallery', fixtures: ['artists', 'artworks'] });
  record(t, store);
  await store.query('DELETE FROM artworks WHERE id > 10');
  assert.equal((await store.counts()).artworks, 12, 'deliberately failing');
});

test('parent of a failing subtest', async (t) => {
  const store = await withStore(t, { template: 'gallery' });
  record(t, store);
  await t.test('failing subtest', () => {
    assert.fail('deliberately failing subtest');
  });
});

test('parent of a failing todo subtest', async (t) => {
  const store = await withStore(t, { template: 'gallery' });
  record(t, store);
  await t.test('failing todo subtest', { todo: true }, () => {
    assert.fail('a todo that fails does not fail its parent');
  });
});

test('parent of a subtest it does not await', async (t) => {
  const store = await withStore(t, { template: 'gallery' });
  record(t, store);
  t.test('subtest not awaited', async () => {
    await new Promise((resolve) => setTimeout(resolve, 100));
  });
});

larderTest('failing test run through larder-sqlite/test', async (t) => {
  const store = await withStore(t, { template: 'gallery', fixtures: ['artists'] });
  record(t, store);
  throw new Error('deliberately failing');
});
`;

// The same on a Node whose TestContext has no `passed` (before 20.12),
// emulated by removing the getter: only the test() wrapper can tell.
const SAMPLE_WITHOUT_PASSED = `
import { test as nodeTest } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync } from 'node:fs';
import { withStore, test } from 'larder-sqlite/test';

const record = (t, store) =>
  appendFileSync(process.env.SAMPLE_IDS, JSON.stringify({ name: t.name, id: store.id }) + '\\n');

nodeTest('plain node:test test is refused', async (t) => {
  assert.ok(delete Object.getPrototypeOf(t).passed);
  assert.equal(t.passed, undefined);
  await assert.rejects(withStore(t, { template: 'gallery' }), /larder-sqlite\\/test/);
});

test('wrapped test passes', async (t) => {
  record(t, await withStore(t, { template: 'gallery' }));
});

test('wrapped test fails', async (t) => {
  record(t, await withStore(t, { template: 'gallery' }));
  assert.fail('deliberately failing');
});

test('wrapped test with a failing subtest', async (t) => {
  record(t, await withStore(t, { template: 'gallery' }));
  await t.test('failing subtest', () => assert.fail('deliberately failing subtest'));
});
`;

let server;
let work;

before(async () => {
  server = await startServer();
  work = mkdtempSync(join(tmpdir(), 'larder-node-sample-'));
});

after(async () => {
  if (work) rmSync(work, { recursive: true, force: true });
  await server?.stop();
});

// Runs a sample file under `node --test` in a project of its own whose
// node_modules/larder-sqlite links to this client; answers the run and the store
// id each test recorded, by test name.
async function runSample(dir, source) {
  const project = join(work, dir);
  mkdirSync(join(project, 'node_modules'), { recursive: true });
  symlinkSync(clientDir, join(project, 'node_modules', 'larder-sqlite'), 'dir');
  writeFileSync(join(project, 'sample.test.mjs'), source);
  const idsFile = join(project, 'ids.jsonl');

  const env = { ...process.env, LARDER_URL: server.url, SAMPLE_IDS: idsFile };
  delete env.LARDER_ARTIFACTS; // the default: larder-artifacts/ in the working directory
  delete env.LARDER_TOKEN;
  delete env.NODE_TEST_CONTEXT; // set in a test run; the child runs tests of its own
  const run = await new Promise((resolvePromise) => {
    execFile(
      process.execPath,
      ['--test', '--test-reporter=tap', 'sample.test.mjs'],
      { cwd: project, env, timeout: 60_000 },
      (error, stdout, stderr) => resolvePromise({ code: error ? error.code : 0, stdout, stderr })
    );
  });
  const output = `exit ${run.code}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}`;
  const ids = existsSync(idsFile)
    ? Object.fromEntries(
        readFileSync(idsFile, 'utf8').trim().split('\n').map((line) => {
          const { name, id } = JSON.parse(line);
          return [name, id];
        })
      )
    : {};
  return { project, run, ids, output };
}

describe('larder-sqlite/test', () => {
  test('fileSafeName', () => {
    assert.equal(fileSafeName('failing test: counts/wrong'), 'failing_test__counts_wrong');
    assert.equal(fileSafeName('..hidden..'), 'hidden');
    assert.equal(fileSafeName('ünïcode ✓'), '_n_code__');
    assert.equal(fileSafeName(''), 'test');
    assert.equal(fileSafeName('x'.repeat(300)).length, 120);
  });

  test('withStore refuses a context that cannot tell failure', async () => {
    const oldContext = { name: 'old node', after() {}, signal: new AbortController().signal };
    await assert.rejects(withStore(oldContext, { template: 'gallery' }), /larder-sqlite\/test/);
  });

  test('in a node --test run, a failed test keeps its store and artifact, a passed one deletes it', async () => {
    const { project, run, ids, output } = await runSample('project', SAMPLE);
    assert.equal(run.code, 1, `node --test fails (tests failed)\n${output}`);
    // Passed: two tests. Failed: four tests and one subtest; the subtest not
    // awaited is cancelled; the failing todo subtest is a todo.
    assert.match(run.stdout, /^# pass 2$/m, output);
    assert.match(run.stdout, /^# fail 5$/m, output);
    assert.match(run.stdout, /^# cancelled 1$/m, output);
    assert.match(run.stdout, /^ok \d+ - passing test$/m, output);
    assert.match(run.stdout, /^ok \d+ - parent of a failing todo subtest$/m, output);
    assert.doesNotMatch(run.stdout, /cleanup of store .* failed/, output);

    assert.deepEqual(Object.keys(ids).sort(), [
      'failing test run through larder-sqlite/test',
      'failing test: counts/wrong',
      'parent of a failing subtest',
      'parent of a failing todo subtest',
      'parent of a subtest it does not await',
      'passing test',
    ]);

    const larder = new Larder({ url: server.url });
    for (const name of ['passing test', 'parent of a failing todo subtest']) {
      await assert.rejects(larder.getStore(ids[name]), { status: 404, code: 'store_not_found' }, `${name}: deleted`);
    }

    const artifacts = join(project, 'larder-artifacts');
    const expected = [];
    const failed = [
      'failing test: counts/wrong',
      'parent of a failing subtest',
      'parent of a subtest it does not await',
      'failing test run through larder-sqlite/test',
    ];
    for (const name of failed) {
      const store = await larder.getStore(ids[name]);
      assert.equal(store.info.keep, true, `${name}: kept`);
      assert.equal(store.info.label, name, `${name}: labelled with the test's name`);
      const zip = join(artifacts, `${fileSafeName(name)}-${store.id}.zip`);
      expected.push(`${fileSafeName(name)}-${store.id}.zip`);
      assert.ok(existsSync(zip), `${name}: ${zip} exists\n${output}`);
      const names = zipNames(zip);
      assert.ok(names.includes('store.sqlite'), `${name}: store.sqlite in ${names}`);
      assert.ok(names.includes('manifest.json'), `${name}: manifest.json in ${names}`);
      assert.match(run.stdout, new RegExp(`store ${store.id} of the failed test is kept`), output);
      await store.delete();
    }
    assert.deepEqual(readdirSync(artifacts).sort(), expected.sort(), 'one zip per failed test, none for the passing one');

    // The artifact is the store as the failed test left it.
    const zip = join(artifacts, `${fileSafeName('failing test: counts/wrong')}-${ids['failing test: counts/wrong']}.zip`);
    const artworks = execFileSync(
      'python3',
      [
        '-c',
        [
          'import os, sqlite3, sys, tempfile, zipfile',
          'with tempfile.TemporaryDirectory() as d:',
          '    zipfile.ZipFile(sys.argv[1]).extract("store.sqlite", d)',
          '    db = sqlite3.connect(os.path.join(d, "store.sqlite"))',
          '    print(db.execute("SELECT count(*) FROM artworks").fetchone()[0])',
          '    db.close()',
        ].join('\n'),
        zip,
      ],
      { encoding: 'utf8' }
    ).trim();
    assert.equal(artworks, '10');
  });
  test('without TestContext.passed (Node before 20.12), the test() wrapper tells', async () => {
    const { project, run, ids, output } = await runSample('old-node', SAMPLE_WITHOUT_PASSED);
    assert.equal(run.code, 1, `node --test fails (tests failed)\n${output}`);
    assert.match(run.stdout, /^# pass 2$/m, output);
    assert.match(run.stdout, /^# fail 3$/m, output); // two tests and the failing subtest
    assert.match(run.stdout, /^ok \d+ - plain node:test test is refused$/m, output);

    const larder = new Larder({ url: server.url });
    await assert.rejects(larder.getStore(ids['wrapped test passes']), { status: 404 }, output);
    for (const name of ['wrapped test fails', 'wrapped test with a failing subtest']) {
      const store = await larder.getStore(ids[name]);
      assert.equal(store.info.keep, true, `${name}: kept\n${output}`);
      const zip = join(project, 'larder-artifacts', `${fileSafeName(name)}-${store.id}.zip`);
      assert.ok(zipNames(zip).includes('store.sqlite'), `${name}: store.sqlite in ${zip}`);
      await store.delete();
    }
  });
});
