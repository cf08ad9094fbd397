// The node:test helper (larder-sqlite/test): a sample test file with passing and
// failing tests runs under `node --test` in a subprocess; afterwards the
// failed tests' stores are kept with their artifacts saved, the passing
// tests' stores are gone.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { Larder } from 'larder-sqlite';
import { LABEL_MAX_BYTES, configure, cutLabel, fileSafeName, runPrefix, withStore } from 'larder-sqlite/test';
import { startServer, zipNames } from './support.js';
import { jsonLines, makeProject, RUN_VARIABLE_NAMES, runNode, sampleEnv } from './project.js';

const clientDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');

// The sample, as a user would write it: it imports the installed package
// by name (node_modules/larder-sqlite links to this client).
const SAMPLE = `
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync } from 'node:fs';
import { withStore, test as larderTest } from 'larder-sqlite/test';

const record = (t, store) =>
  appendFileSync(process.env.SAMPLE_IDS, JSON.stringify({ name: t.name, id: store.id, label: store.info.label }) + '\\n');

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
// node_modules/larder-sqlite links to this client, with `extraEnv` (e.g. a
// run prefix); answers the run, the store id each test recorded and the
// label the server gave the store, by test name.
async function runSample(dir, source, extraEnv = {}) {
  const project = join(work, dir);
  mkdirSync(join(project, 'node_modules'), { recursive: true });
  symlinkSync(clientDir, join(project, 'node_modules', 'larder-sqlite'), 'dir');
  writeFileSync(join(project, 'sample.test.mjs'), source);
  const idsFile = join(project, 'ids.jsonl');

  const env = { ...process.env, LARDER_URL: server.url, SAMPLE_IDS: idsFile };
  delete env.LARDER_ARTIFACTS; // the default: larder-artifacts/ in the working directory
  delete env.LARDER_TOKEN;
  delete env.NODE_TEST_CONTEXT; // set in a test run; the child runs tests of its own
  for (const name of RUN_VARIABLE_NAMES) delete env[name]; // this run's own (a CI system's) prefix
  Object.assign(env, extraEnv);
  const run = await new Promise((resolvePromise) => {
    execFile(
      process.execPath,
      ['--test', '--test-reporter=tap', 'sample.test.mjs'],
      { cwd: project, env, timeout: 60_000 },
      (error, stdout, stderr) => resolvePromise({ code: error ? error.code : 0, stdout, stderr })
    );
  });
  const output = `exit ${run.code}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}`;
  const lines = existsSync(idsFile) ? readFileSync(idsFile, 'utf8').trim().split('\n').map((line) => JSON.parse(line)) : [];
  const ids = Object.fromEntries(lines.map(({ name, id }) => [name, id]));
  const labels = Object.fromEntries(lines.map(({ name, label }) => [name, label]));
  return { project, run, ids, labels, output };
}

// DELETE /stores?label_prefix=PREFIX, by hand (the client has no call for it).
async function deleteByPrefix(prefix) {
  const res = await fetch(`${server.url}/stores?label_prefix=${encodeURIComponent(prefix)}`, { method: 'DELETE' });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return JSON.parse(text).deleted;
}

// `label` cut to `max` bytes of UTF-8 at a character boundary: whole code
// points while they fit (an independent reading of the rule cutLabel follows).
function cutByCodePoints(label, max) {
  let out = '';
  let bytes = 0;
  for (const ch of label) {
    const n = Buffer.byteLength(ch, 'utf8');
    if (bytes + n > max) break;
    out += ch;
    bytes += n;
  }
  return out;
}

// A long test name of 2-, 3- and 4-byte characters: 30 x 9 = 270 bytes.
const LONG_NAME = 'Ä€😀'.repeat(30);

// A project of test files whose tests record their labels; a.test.mjs and
// b.test.mjs have a test of the same name path.
const RECORD_LABEL = `
import { appendFileSync } from 'node:fs';
export const record = (file, t, store) =>
  appendFileSync(process.env.SAMPLE_IDS, JSON.stringify({ file, name: t.name, id: store.id, label: store.info.label }) + '\\n');
`;
const SAME_NAME = (file) => `
import { describe, test } from 'node:test';
import { withStore } from 'larder-sqlite/test';
import { record } from '../record.mjs';

describe('albums', () => {
  test('collects artworks', async (t) => record('${file}', t, await withStore(t, { template: 'gallery' })));
});
`;
const LONG_FILE = `
import { test } from 'node:test';
import { withStore } from 'larder-sqlite/test';
import { record } from '../record.mjs';

test(${JSON.stringify(LONG_NAME)}, async (t) => record('long', t, await withStore(t, { template: 'gallery' })));
`;
const EXPLICIT_FILE = `
import { test } from 'node:test';
import { configure, withStore } from 'larder-sqlite/test';
import { record } from '../record.mjs';

configure({ run: 'explicit-run' });
test('explicit option', async (t) => record('explicit', t, await withStore(t, { template: 'gallery' })));
`;
// Node 18 has no TestContext.fullName (nor filePath): removed here, the
// name path comes from this module's describe and the subtests it saw.
const OLD_NODE_FILE = `
import assert from 'node:assert/strict';
import { describe, test, withStore } from 'larder-sqlite/test';
import { record } from '../record.mjs';

describe('old node', () => {
  describe('nested', () => {
    test('case', async (t) => {
      assert.ok(delete Object.getPrototypeOf(t).fullName);
      assert.equal(t.fullName, undefined);
      assert.equal(t.filePath, undefined);
      record('old', t, await withStore(t, { template: 'gallery' }));
      await t.test('subtest', async (s) => record('old-sub', s, await withStore(s, { template: 'gallery' })));
    });
  });
});
`;
// One process running two test files (no node --test): the file comes from the stack.
const RUN_ALL = `
await import('./test/a.test.mjs');
await import('./test/b.test.mjs');
`;

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

  test('runPrefix: the run option, else the first run variable pair that is set, else none', () => {
    assert.equal(runPrefix({}), null);
    assert.equal(runPrefix({ LARDER_RUN: 'r1' }), 'r1');
    assert.equal(runPrefix({ LARDER_RUN: '' }), null);
    assert.equal(runPrefix({ GITHUB_ACTIONS: 'true', GITHUB_RUN_ID: '123' }), '123');
    // A CI system's variable without its condition variable is not that CI system.
    assert.equal(runPrefix({ GITHUB_RUN_ID: '123' }), null);
    assert.equal(runPrefix({ GITHUB_RUN_ID: '123', GITHUB_ACTIONS: '' }), null);
    assert.equal(runPrefix({ CI_PIPELINE_ID: '9', GITLAB_CI: 'true', GITHUB_RUN_ID: '123' }), '9');
    assert.equal(runPrefix({ BUILDKITE_BUILD_ID: 'bk', BUILDKITE: 'true' }), 'bk');
    assert.equal(runPrefix({ BUILD_TAG: 'jenkins-job-7', JENKINS_URL: 'http://ci/' }), 'jenkins-job-7');
    assert.equal(runPrefix({ CIRCLE_WORKFLOW_ID: 'wf', CIRCLECI: 'true' }), 'wf');
    // LARDER_RUN comes first.
    assert.equal(runPrefix({ LARDER_RUN: 'mine', GITHUB_ACTIONS: 'true', GITHUB_RUN_ID: '123' }), 'mine');
    // The option wins.
    try {
      configure({ run: 'explicit' });
      assert.equal(runPrefix({ LARDER_RUN: 'mine', GITHUB_ACTIONS: 'true', GITHUB_RUN_ID: '123' }), 'explicit');
    } finally {
      configure({});
    }
    assert.throws(() => configure({ run: 5 }), TypeError);
  });

  test('cutLabel: at most 256 bytes, at a character boundary, keeping the start', () => {
    assert.equal(LABEL_MAX_BYTES, 256);
    assert.equal(cutLabel('short'), 'short');
    assert.equal(cutLabel('x'.repeat(256)), 'x'.repeat(256));
    assert.equal(cutLabel('x'.repeat(300)), 'x'.repeat(256));
    for (const [label, bytes] of [
      ['é'.repeat(200), 256], // 2-byte: 128 of them
      ['€'.repeat(100), 255], // 3-byte: 85 of them, the 86th would straddle
      ['a' + '😀'.repeat(70), 253], // 4-byte after one ASCII: 1 + 63 x 4
      [`run/test/a.test.mjs/${LONG_NAME}`, null],
    ]) {
      const cut = cutLabel(label);
      assert.ok(Buffer.byteLength(cut) <= 256, `${Buffer.byteLength(cut)} bytes`);
      if (bytes !== null) assert.equal(Buffer.byteLength(cut), bytes);
      assert.ok(label.startsWith(cut), 'keeps the start');
      assert.ok(!cut.includes('\ufffd'), 'no broken character');
      assert.equal(cut, cutByCodePoints(label, 256));
    }
  });

  test('labels RUN/PACKAGE/TEST in node --test runs: the run variables, the option, the file, the name path, the length', async () => {
    const project = join(work, 'labels');
    mkdirSync(join(project, 'test'), { recursive: true });
    makeProject(project, {
      files: {
        'record.mjs': RECORD_LABEL,
        'test/a.test.mjs': SAME_NAME('a'),
        'test/b.test.mjs': SAME_NAME('b'),
        'test/long.test.mjs': LONG_FILE,
        'test/explicit.test.mjs': EXPLICIT_FILE,
        'test/old.test.mjs': OLD_NODE_FILE,
        'runall.mjs': RUN_ALL,
      },
    });
    const files = ['test/a.test.mjs', 'test/b.test.mjs', 'test/long.test.mjs', 'test/explicit.test.mjs', 'test/old.test.mjs'];
    const larderRun = `node-labels-${randomUUID()}`;
    let n = 0;
    const runWith = async (set, args = ['--test', '--test-reporter=tap', ...files]) => {
      const log = join(project, `labels-${(n += 1)}.jsonl`);
      const run = await runNode(project, args, sampleEnv({ LARDER_URL: server.url, SAMPLE_IDS: log, ...set }));
      assert.equal(run.code, 0, run.output);
      return { labels: Object.fromEntries(jsonLines(log).map((e) => [e.file, e.label])), output: run.output };
    };
    const expected = (prefix) => {
      const p = prefix ? `${prefix}/` : '';
      return {
        a: `${p}test/a.test.mjs/albums > collects artworks`,
        b: `${p}test/b.test.mjs/albums > collects artworks`,
        long: cutByCodePoints(`${p}test/long.test.mjs/${LONG_NAME}`, 256),
        explicit: 'explicit-run/test/explicit.test.mjs/explicit option', // configure({run}) wins
        old: `${p}test/old.test.mjs/old node > nested > case`,
        'old-sub': `${p}test/old.test.mjs/old node > nested > case > subtest`,
      };
    };

    // LARDER_RUN (before a CI system's run id).
    const withRun = await runWith({ LARDER_RUN: larderRun, GITHUB_ACTIONS: 'true', GITHUB_RUN_ID: '123' });
    assert.deepEqual(withRun.labels, expected(larderRun), withRun.output);
    // Two tests of the same name in two files are told apart.
    assert.notEqual(withRun.labels.a, withRun.labels.b);
    // A long one is cut to 256 bytes, at a character boundary.
    assert.ok(Buffer.byteLength(`${larderRun}/test/long.test.mjs/${LONG_NAME}`) > 256);
    assert.ok(Buffer.byteLength(withRun.labels.long) <= 256 && Buffer.byteLength(withRun.labels.long) > 252, withRun.labels.long);

    // A CI system's pair: GitHub Actions' run id.
    const github = await runWith({ GITHUB_ACTIONS: 'true', GITHUB_RUN_ID: '123' });
    assert.deepEqual(github.labels, expected('123'), github.output);

    // A CI variable without its condition is ignored (GITLAB_CI empty counts as unset).
    const stray = await runWith({ GITHUB_RUN_ID: '123', CI_PIPELINE_ID: '77', GITLAB_CI: '' });
    assert.deepEqual(stray.labels, expected(null), stray.output);

    // Nothing: PACKAGE/TEST.
    const none = await runWith({});
    assert.deepEqual(none.labels, expected(null), none.output);
    assert.equal(none.labels.a, 'test/a.test.mjs/albums > collects artworks');

    // Two test files in one plain `node` process: the file is read from the stack.
    const together = await runWith({ LARDER_RUN: larderRun }, ['runall.mjs']);
    const both = expected(larderRun);
    assert.deepEqual(together.labels, { a: both.a, b: both.b }, together.output);
  });

  test('in a node --test run, a failed test keeps its store and artifact, a passed one deletes it; DELETE by the run prefix removes them', async () => {
    const runId = `node-run-${randomUUID()}`;
    const larder = new Larder({ url: server.url });
    // A store of another run, which the prefix delete leaves alone.
    const other = await larder.createStore({ template: 'gallery', label: `${runId}-other/sample.test.mjs/kept elsewhere` });
    await other.keep();
    const { project, run, ids, labels, output } = await runSample('project', SAMPLE, { LARDER_RUN: runId });
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

    for (const [name, label] of Object.entries(labels)) {
      assert.equal(label, `${runId}/sample.test.mjs/${name}`, `${name}: labelled RUN/PACKAGE/TEST`);
    }
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
      assert.equal(store.info.label, `${runId}/sample.test.mjs/${name}`, `${name}: labelled RUN/PACKAGE/TEST`);
      const zip = join(artifacts, `${fileSafeName(name)}-${store.id}.zip`);
      expected.push(`${fileSafeName(name)}-${store.id}.zip`);
      assert.ok(existsSync(zip), `${name}: ${zip} exists\n${output}`);
      const names = zipNames(zip);
      assert.ok(names.includes('store.sqlite'), `${name}: store.sqlite in ${names}`);
      assert.ok(names.includes('manifest.json'), `${name}: manifest.json in ${names}`);
      assert.match(run.stdout, new RegExp(`store ${store.id} of the failed test is kept`), output);
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

    // The run's kept stores go at once, by their prefix; another run's stays.
    assert.equal(await deleteByPrefix(`${runId}/`), failed.length);
    for (const name of failed) {
      await assert.rejects(larder.getStore(ids[name]), { status: 404, code: 'store_not_found' }, `${name}: removed by its run prefix`);
    }
    assert.equal((await larder.getStore(other.id)).info.keep, true, 'the store of another prefix stays');
    await other.delete();
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
