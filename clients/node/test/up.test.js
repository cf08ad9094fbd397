// A server the helper starts itself (clients/README.md, "Where a test
// helper's server comes from"): with no URL, larder-sqlite/test runs
// `BINARY up --for PID [--for RUNNER_PID]` once per process and uses the URL
// it prints. Sample projects run in subprocesses with their own TMPDIR, so
// the folder `larder up` keeps its server in can be watched.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Larder } from 'larder-sqlite';
import { fileSafeName } from 'larder-sqlite/test';
import { startServer, zipNames } from './support.js';
import { jsonLines, makeProject, pathWithoutLarder, runNode, runsFolder, sampleEnv, sharedServers, waitGone } from './project.js';

const NO_SERVER =
  "Larder: no server to use: set LARDER_URL to a running server's URL, or install the larder binary (set LARDER_BINARY to it, or put it on PATH)";

// Two test files, which `node --test` runs as two processes. Each test
// records its store, the URL its client uses, its process and the servers
// `larder up` keeps under TMPDIR.
const RECORD = `
import { appendFileSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { defaultLarder } from 'larder-sqlite/test';

function servers() {
  const folder = join(process.env.TMPDIR, 'larder-' + process.getuid());
  if (!existsSync(folder)) return [];
  return readdirSync(folder)
    .filter((key) => existsSync(join(folder, key, 'server.json')))
    .map((key) => ({ key, ...JSON.parse(readFileSync(join(folder, key, 'server.json'), 'utf8')) }));
}

export async function record(file, t, store) {
  const entry = {
    file, name: t.name, id: store.id, label: store.info.label, at: Date.now(), url: (await defaultLarder()).url,
    pid: process.pid, ppid: process.ppid, servers: servers(),
  };
  appendFileSync(process.env.SAMPLE_LOG, JSON.stringify(entry) + '\\n');
}

export function recorded(name) {
  return readFileSync(process.env.SAMPLE_LOG, 'utf8').trim().split('\\n').map((l) => JSON.parse(l)).find((e) => e.name === name);
}
`;

const FILE_A = `
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defaultLarder, withStore } from 'larder-sqlite/test';
import { record, recorded } from './record.mjs';

test('a passes', async (t) => {
  const store = await withStore(t, { template: 'gallery', fixtures: ['artists', 'artworks'] });
  await record('a', t, store);
  assert.equal(store.info.counts.artworks, 12);
});

test('a fails deliberately', async (t) => {
  const store = await withStore(t, { template: 'gallery', fixtures: ['artists'] });
  await record('a', t, store);
  await store.query("INSERT INTO artists (name) VALUES ('Kept')");
  assert.equal((await store.counts({ tables: ['artists'] })).artists, 4, 'deliberately failing');
});

test('the failed store is kept', async () => {
  const store = await (await defaultLarder()).getStore(recorded('a fails deliberately').id);
  assert.equal(store.info.keep, true);
  assert.equal((await store.counts({ tables: ['artists'] })).artists, 5);
});
`;

const FILE_B = `
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withStore } from 'larder-sqlite/test';
import { record } from './record.mjs';

test('b passes', async (t) => {
  const store = await withStore(t, { template: 'gallery', fixtures: ['artists'] });
  await record('b', t, store);
  assert.equal(store.info.counts.artists, 4);
});

test('b passes again', async (t) => {
  const store = await withStore(t, { template: 'gallery' });
  await record('b', t, store);
  assert.equal(store.info.counts.artists, 0);
});
`;

// One process asking for the helper's client: prints {url, store} or {error}.
// PROBE_CONFIGURE: JSON given to configure() first.
const PROBE = `
import { configure, defaultLarder } from 'larder-sqlite/test';
if (process.env.PROBE_CONFIGURE) configure(JSON.parse(process.env.PROBE_CONFIGURE));
try {
  const larder = await defaultLarder();
  const store = await larder.createStore({ template: 'gallery', label: 'probe' });
  console.log(JSON.stringify({ url: larder.url, store: store.id, pid: process.pid, ppid: process.ppid }));
} catch (err) {
  console.log(JSON.stringify({
    error: { name: err.name, code: err.code, message: err.message, details: err.details }, pid: process.pid, ppid: process.ppid,
  }));
}
`;

let work;
let server; // a server of the test's own, for the explicit-URL cases

before(async () => {
  work = mkdtempSync(join(tmpdir(), 'larder-node-up-'));
  server = await startServer();
});

after(async () => {
  await server?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

// A stand-in for the binary that logs its arguments, complains and exits 2.
function fakeBinary(dir) {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'fake-larder');
  writeFileSync(file, '#!/bin/sh\necho "$*" >> "$FAKE_LOG"\necho "fake larder: refusing on purpose" >&2\nexit 2\n');
  chmodSync(file, 0o755);
  return { file, log: join(dir, 'fake.log') };
}

async function probe(name, env) {
  const project = makeProject(join(work, name), { files: { 'probe.mjs': PROBE } });
  const run = await runNode(project, ['probe.mjs'], env);
  assert.equal(run.code, 0, run.output);
  return { ...JSON.parse(run.stdout.trim().split('\n').pop()), output: run.output };
}

describe('a server the helper starts', () => {
  test('node --test with no URL: every test gets a store of one shared server, which is gone after the run', async (t) => {
    const project = makeProject(join(work, 'run'), {
      files: { 'record.mjs': RECORD, 'a.test.mjs': FILE_A, 'b.test.mjs': FILE_B },
    });
    const tmp = join(work, 'run-tmp');
    mkdirSync(tmp);
    const log = join(project, 'log.jsonl');
    const env = sampleEnv({ LARDER_BINARY: process.env.LARDER_BINARY, TMPDIR: tmp, SAMPLE_LOG: log, LARDER_RUN: 'up-run' });

    const run = await runNode(project, ['--test', '--test-reporter=tap', 'a.test.mjs', 'b.test.mjs'], env);
    const ended = Date.now();
    const output = run.output;
    const entries = jsonLines(log);
    assert.ok(entries.length > 0 && entries[0].servers.length === 1, `a test recorded its server\n${output}`);
    const { key, pid, url } = entries[0].servers[0];

    // After the run, the server stops and its folder goes (a second after
    // the last process it serves ends; this machine says how long in all).
    const folder = join(runsFolder(tmp), key);
    await waitGone({ url, pid, folder }, 5_000);
    const gone = Date.now() - ended;
    const first = Math.min(...entries.map((e) => e.at)) - run.startedAt;
    t.diagnostic(`first store ${first} ms after node --test started; server and ${folder} gone ${gone} ms after the run ended`);

    assert.equal(run.code, 1, `one test fails\n${output}`);
    assert.match(run.stdout, /^# pass 4$/m, output);
    assert.match(run.stdout, /^# fail 1$/m, output);
    assert.match(run.stdout, /^not ok \d+ - a fails deliberately$/m, output);
    assert.match(run.stdout, /^ok \d+ - the failed store is kept$/m, output);

    // Each test got a store; both files (two processes) used one server.
    assert.deepEqual(entries.map((e) => e.name).sort(), ['a fails deliberately', 'a passes', 'b passes', 'b passes again'], output);
    assert.equal(new Set(entries.map((e) => e.id)).size, 4, 'four stores');
    for (const e of entries) assert.equal(e.label, `up-run/${e.file}.test.mjs/${e.name}`, 'labelled RUN/PACKAGE/TEST');
    const pids = new Set(entries.map((e) => e.pid));
    assert.equal(pids.size, 2, `two test processes: ${[...pids]}`);
    assert.equal(new Set(entries.map((e) => e.ppid)).size, 1, 'one runner');
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
    for (const e of entries) {
      assert.equal(e.url, url, `${e.name}: the client of the one server`);
      // (server.json says more, such as the server's start time: only these matter here.)
      assert.deepEqual(e.servers.map((s) => ({ key: s.key, pid: s.pid, url: s.url })), [{ key, pid, url }], `${e.name}: one server under TMPDIR`);
    }

    // The failed test's artifact is saved (its store was kept: 'the failed store is kept').
    const failed = entries.find((e) => e.name === 'a fails deliberately');
    const zip = join(project, 'larder-artifacts', `${fileSafeName(failed.name)}-${failed.id}.zip`);
    assert.ok(existsSync(zip), `${zip}\n${output}`);
    assert.ok(zipNames(zip).includes('store.sqlite'));
    assert.deepEqual(readdirSync(join(project, 'larder-artifacts')), [`${fileSafeName(failed.name)}-${failed.id}.zip`]);
  });

  test('no URL and no binary: the one sentence naming both ways out', async () => {
    const answer = await probe('no-binary', sampleEnv({ PATH: pathWithoutLarder(join(work, 'bare-bin')), TMPDIR: work }));
    assert.ok(answer.error, answer.output);
    assert.equal(answer.error.name, 'LarderError');
    assert.equal(answer.error.code, 'no_server');
    assert.equal(answer.error.message, NO_SERVER);
  });

  test('in a node --test run, a test without a server fails with that sentence', async () => {
    const source = `
import { test } from 'node:test';
import { withStore } from 'larder-sqlite/test';
test('needs a store', async (t) => { await withStore(t, { template: 'gallery' }); });
`;
    const project = makeProject(join(work, 'no-binary-run'), { files: { 'x.test.mjs': source } });
    const run = await runNode(project, ['--test', '--test-reporter=tap', 'x.test.mjs'], sampleEnv({ PATH: pathWithoutLarder(join(work, 'bare-bin')) }));
    assert.equal(run.code, 1, run.output);
    assert.ok(run.stdout.includes(NO_SERVER.replace(/'/g, "\\'")) || run.stdout.includes(NO_SERVER), run.output);
  });

  test('a URL given (LARDER_URL, or configure({url})) starts nothing', async () => {
    const fake = fakeBinary(join(work, 'fake-url'));
    const bare = pathWithoutLarder(join(work, 'bare-bin'));
    const larder = new Larder({ url: server.url });
    const viaEnv = await probe('url-env', sampleEnv({ LARDER_URL: server.url, LARDER_BINARY: fake.file, FAKE_LOG: fake.log, PATH: bare }));
    assert.equal(viaEnv.url, server.url, viaEnv.output);
    assert.equal((await larder.getStore(viaEnv.store)).info.label, 'probe');

    const viaOption = await probe('url-option', sampleEnv({
      PROBE_CONFIGURE: JSON.stringify({ url: server.url, binary: fake.file }), FAKE_LOG: fake.log, PATH: bare,
    }));
    assert.equal(viaOption.url, server.url, viaOption.output);
    assert.equal((await larder.getStore(viaOption.store)).info.label, 'probe');
    assert.equal(existsSync(fake.log), false, 'the binary was not run');
  });

  test('a failing `larder up` rejects with a LarderError carrying its stderr', async () => {
    const fake = fakeBinary(join(work, 'fake-fail'));
    const answer = await probe('fake-fail', sampleEnv({ LARDER_BINARY: fake.file, FAKE_LOG: fake.log }));
    assert.ok(answer.error, answer.output);
    assert.equal(answer.error.name, 'LarderError');
    assert.equal(answer.error.code, 'server_start_failed');
    assert.match(answer.error.message, /fake larder: refusing on purpose/);
    assert.match(answer.error.details.stderr, /fake larder: refusing on purpose/);
    assert.equal(answer.error.details.exitCode, 2);
    // Run three times (it exits non-zero), for this process only (not in a test runner).
    assert.equal(answer.error.details.attempts, 3);
    assert.deepEqual(readLines(fake.log), Array(3).fill(`up --for ${answer.pid}`));

    // The real binary, told of a fixtures folder that is not there.
    const missing = join(work, 'no-such-fixtures');
    const real = await probe('real-fail', sampleEnv({ LARDER_BINARY: process.env.LARDER_BINARY, LARDER_FIXTURES: missing, TMPDIR: work }));
    assert.ok(real.error, real.output);
    assert.equal(real.error.code, 'server_start_failed');
    assert.ok(real.error.details.stderr.includes(missing), real.output);
    assert.ok(real.error.message.includes(missing), real.output);
  });

  test('what `larder up` is given: the binary option first, the fixtures folder, the runner', async () => {
    const fake = fakeBinary(join(work, 'fake-args'));
    const answer = await probe('fake-args', sampleEnv({
      LARDER_BINARY: process.env.LARDER_BINARY, // the option wins over it
      PROBE_CONFIGURE: JSON.stringify({ binary: fake.file, fixtures: 'fixtures', serverArgs: ['--build-lease-seconds', '60'] }),
      NODE_TEST_CONTEXT: 'child', // as node --test sets it in its test processes
      FAKE_LOG: fake.log,
    }));
    assert.equal(answer.error?.code, 'server_start_failed', answer.output);
    // (Three runs of the same: the fake exits 2, and a failed `larder up` is run again.)
    assert.deepEqual(readLines(fake.log), Array(3).fill(
      `up --for ${answer.pid} --for ${answer.ppid} --fixtures ${join(work, 'fake-args', 'fixtures')} --build-lease-seconds 60`,
    ));

    // LARDER_FIXTURES, relative to the working directory.
    rmSync(fake.log);
    const viaEnv = await probe('fake-args-env', sampleEnv({ LARDER_BINARY: fake.file, LARDER_FIXTURES: 'fixtures', FAKE_LOG: fake.log }));
    assert.deepEqual(readLines(fake.log), Array(3).fill(`up --for ${viaEnv.pid} --fixtures ${join(work, 'fake-args-env', 'fixtures')}`));
  });
});

// The lines of a file (none when it does not exist).
function readLines(file) {
  return existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').filter(Boolean) : [];
}
