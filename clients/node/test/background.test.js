// What the node:test helper does in the background (issue 48): while a test runs, the next store
// of its spec is made ready; a passing test's store is deleted after it; the process's end deletes
// the ready store no test took and waits for the rest. Sample test files run under `node --test`
// in subprocesses, against a server of this file's own (LARDER_URL), one `larder up` starts, or a
// proxy in front of this file's server that refuses deletes. The samples wait on what the server
// says, within deadlines.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest, createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Larder } from 'larder-sqlite';
import { BACKGROUND_MAX, DELETE_BATCH, READY_MAX_AGE_MS, RELABEL_AFTER_MS, fileSafeName } from 'larder-sqlite/test';
import { fixturesDir, startServer, zipNames } from './support.js';
import { jsonLines, makeProject, runNode, runsFolder, sampleEnv, sharedServers, waitGone } from './project.js';

// What the samples share: a log of what each test saw, and a wait for the store the helper makes
// ready (found by its label: the file's, then "(made ready for the next test)").
const RECORD = `
import { appendFileSync } from 'node:fs';
import { Larder } from 'larder-sqlite';

export const SPEC = { template: 'gallery', fixtures: ['artists', 'artworks'] };

export function record(entry) {
  appendFileSync(process.env.SAMPLE_LOG, JSON.stringify(entry) + '\\n');
}

// A client of the sample's own: the helper's is not asked.
const larder = new Larder({ url: process.env.SAMPLE_SERVER });
const pause = () => new Promise((r) => setTimeout(r, 20));

/** The stores whose label starts with \`prefix\`. */
export async function storesOf(prefix) {
  return (await larder.request('GET', '/stores', { query: { label_prefix: prefix } })).stores;
}

/** The id of the store made ready for the next test of file \`file\`, once it is on the server (20 s at most). */
export async function readyStore(file, spec = SPEC) {
  const prefix = (process.env.LARDER_RUN ? process.env.LARDER_RUN + '/' : '') + file + '/(made ready for the next test) ';
  for (const deadline = Date.now() + 20_000; Date.now() < deadline; await pause()) {
    const found = (await storesOf(prefix)).filter((s) => s.template === spec.template);
    if (found.length === 1) return found[0].id;
    if (found.length > 1) throw new Error('more than one ready store: ' + found.map((s) => s.id));
  }
  throw new Error('no store made ready within 20 s');
}

/** The label of store \`id\` once it is \`label\` (20 s at most; then the last one seen). */
export async function labelled(id, label) {
  let seen;
  for (const deadline = Date.now() + 20_000; Date.now() < deadline; await pause()) {
    seen = (await larder.getStore(id)).info.label;
    if (seen === label) break;
  }
  return seen;
}

/** Whether the store \`id\` is gone from the server within 20 s. */
export async function gone(id) {
  for (const deadline = Date.now() + 20_000; Date.now() < deadline; await pause()) {
    try {
      await larder.getStore(id);
    } catch (err) {
      if (err.status === 404) return true;
      throw err;
    }
  }
  return false;
}

export { larder };
`;

// Four tests of one spec, then one of another. Each of the first three writes into its store; the
// next must get the store made ready meanwhile, untouched, labelled its own (the fourth asks the
// server nothing through the helper's client: relabelled all the same).
const READY = `
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { storeLabel, withStore } from 'larder-sqlite/test';
import { SPEC, labelled, larder, readyStore, record } from './record.mjs';

async function look(t, store, ready) {
  const entry = {
    name: t.name, id: store.id, path: store.path, ready, label: store.info.label, expected: storeLabel(t),
    // Asked through the helper's client: it waits for the relabelling.
    serverLabel: (await store.refresh()).label,
    counts: await store.counts({ tables: ['artists', 'artworks'] }),
    diff: await store.diff(),
  };
  await store.query("INSERT INTO artists (name) VALUES ('Written by ' || ?)", [t.name]);
  record(entry);
}

let ready = null;
for (const name of ['first', 'second', 'third']) {
  test(name, async (t) => {
    const store = await withStore(t, SPEC);
    await look(t, store, ready);
    ready = await readyStore('ready.test.mjs');
  });
}

test('fourth, quiet', async (t) => {
  const store = await withStore(t, SPEC);
  // Its client asks nothing: the label comes a while into the test.
  record({ name: t.name, id: store.id, ready, label: store.info.label, serverLabel: await labelled(store.id, storeLabel(t)) });
  ready = await readyStore('ready.test.mjs');
});

test('another spec', async (t) => {
  const store = await withStore(t, { template: 'gallery' });
  record({ name: t.name, id: store.id, ready, counts: await store.counts({ tables: ['artists'] }), discarded: await (await import('./record.mjs')).gone(ready) });
});
`;

// A test that passes (its store made the next one ready), then one that fails with that store.
const KEPT = `
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withStore } from 'larder-sqlite/test';
import { SPEC, readyStore, record } from './record.mjs';

test('passes first', async (t) => {
  await withStore(t, SPEC);
  record({ name: t.name, ready: await readyStore('kept.test.mjs') });
});

test('fails with a ready store', async (t) => {
  const store = await withStore(t, SPEC);
  record({ name: t.name, id: store.id });
  await store.query("INSERT INTO artists (name) VALUES ('Left for a look')");
  assert.fail('deliberately failing');
});
`;

// Tests that pass: their stores go in the background; one ready store is left at the end.
const PASSING = (n) => `
import { test } from 'node:test';
import { withStore, defaultLarder } from 'larder-sqlite/test';
import { SPEC, record } from './record.mjs';

for (let i = 1; i <= ${n}; i += 1) {
  test('passes ' + i, async (t) => {
    const store = await withStore(t, SPEC);
    record({ name: t.name, id: store.id, url: (await defaultLarder()).url, pid: process.pid });
  });
}
`;

// settle() in a describe's after hook (where a suite would stop a server of its own): nothing of the
// run is left on the server by then.
const SETTLE = `
import { after, describe, test } from 'node:test';
import { settle, withStore } from 'larder-sqlite/test';
import { SPEC, record, storesOf } from './record.mjs';

describe('suite', () => {
  after(async () => {
    await settle();
    record({ name: 'after settle', left: (await storesOf(process.env.LARDER_RUN + '/')).map((s) => s.label) });
  });
  for (let i = 1; i <= 6; i += 1) test('passes ' + i, async (t) => { await withStore(t, SPEC); });
});
`;

// Tests whose stores must still be there while they run, asked through a client of the sample's own
// (the helper's would relabel them): a batch's delete must take its own stores and no others.
const ALIVE = (n) => `
import { test } from 'node:test';
import { withStore } from 'larder-sqlite/test';
import { SPEC, larder, record } from './record.mjs';

for (let i = 1; i <= ${n}; i += 1) {
  test('alive ' + i, async (t) => {
    const store = await withStore(t, SPEC);
    await larder.getStore(store.id);
    record({ name: t.name, id: store.id });
  });
}
`;

let server;
let work;

before(async () => {
  server = await startServer();
  work = mkdtempSync(join(tmpdir(), 'larder-node-background-'));
});

after(async () => {
  await server?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

/** Runs `files` ({name: source}) under node --test in a project of its own; answers the run and its log. */
async function runSample(name, files, env) {
  const project = makeProject(join(work, name), { files: { 'record.mjs': RECORD, ...files } });
  const log = join(project, 'log.jsonl');
  const run = await runNode(project, ['--test', '--test-reporter=tap', ...Object.keys(files)], sampleEnv({ SAMPLE_LOG: log, ...env }));
  const entries = Object.fromEntries(jsonLines(log).map((e) => [e.name, e]));
  return { project, run, entries, output: run.output };
}

/** The stores on the server at `url` whose label starts with `prefix`. */
async function storesOf(url, prefix) {
  const stores = await new Larder({ url }).listStores({ limit: 1000 });
  return stores.filter((s) => s.label?.startsWith(prefix));
}

describe('withStore in the background', () => {
  test('the next test gets the store made ready while the last one ran: fresh, isolated, labelled its own; another spec discards it', async () => {
    assert.equal(READY_MAX_AGE_MS, 60_000);
    assert.equal(RELABEL_AFTER_MS, 100);
    const runId = `bg-ready-${randomUUID()}`;
    const { run, entries, output } = await runSample('ready', { 'ready.test.mjs': READY }, {
      LARDER_URL: server.url, SAMPLE_SERVER: server.url, LARDER_RUN: runId,
    });
    assert.equal(run.code, 0, output);
    assert.match(run.stdout, /^# pass 5$/m, output);
    const { first, second, third } = entries;
    const template = { artists: 4, artworks: 12 };
    for (const entry of [first, second, third]) {
      // Fresh: the template and fixtures as they are, nothing changed since it was made, though the
      // test before wrote into its own store.
      assert.deepEqual(entry.counts, template, `${entry.name}: ${output}`);
      assert.deepEqual(entry.diff.tables, {}, `${entry.name}: untouched`);
      // Labelled RUN/PACKAGE/TEST, in the client and on the server.
      assert.equal(entry.label, `${runId}/ready.test.mjs/${entry.name}`);
      assert.equal(entry.expected, entry.label);
      assert.equal(entry.serverLabel, entry.label);
    }
    // The second and third got the store made ready during the test before.
    assert.equal(first.ready, null);
    assert.ok(second.ready && third.ready, output);
    assert.equal(second.id, second.ready);
    assert.equal(third.id, third.ready);
    // Isolated: a store and a file of its own.
    assert.equal(new Set([first.id, second.id, third.id]).size, 3);
    assert.equal(new Set([first.path, second.path, third.path]).size, 3);

    // A test whose client asks the server nothing is relabelled RELABEL_AFTER_MS into it.
    const quiet = entries['fourth, quiet'];
    assert.equal(quiet.id, quiet.ready);
    assert.equal(quiet.label, `${runId}/ready.test.mjs/fourth, quiet`);
    assert.equal(quiet.serverLabel, quiet.label);

    // Another spec: a store made for it, the ready one deleted while the test ran.
    const other = entries['another spec'];
    assert.notEqual(other.id, other.ready);
    assert.equal(other.counts.artists, 0);
    assert.equal(other.discarded, true, 'the ready store of the other spec is deleted');

    // The run's end left nothing behind: the passing tests' stores and the last ready one are gone.
    assert.deepEqual(await storesOf(server.url, `${runId}/`), []);
  });

  test('a failed test that got a ready store keeps it under its own label, with its artifact', async () => {
    const runId = `bg-kept-${randomUUID()}`;
    const { project, run, entries, output } = await runSample('kept', { 'kept.test.mjs': KEPT }, {
      LARDER_URL: server.url, SAMPLE_SERVER: server.url, LARDER_RUN: runId,
    });
    assert.equal(run.code, 1, output);
    assert.match(run.stdout, /^# pass 1$/m, output);
    assert.match(run.stdout, /^# fail 1$/m, output);
    const name = 'fails with a ready store';
    const { id } = entries[name];
    assert.equal(id, entries['passes first'].ready, 'it got the ready store');
    const label = `${runId}/kept.test.mjs/${name}`;
    const store = await new Larder({ url: server.url }).getStore(id);
    assert.equal(store.info.keep, true);
    assert.equal(store.info.label, label);
    assert.equal((await store.counts({ tables: ['artists'] })).artists, 5, 'as the test left it');

    const zip = join(project, 'larder-artifacts', `${fileSafeName(name)}-${id}.zip`);
    assert.ok(existsSync(zip), `${zip}\n${output}`);
    assert.ok(zipNames(zip).includes('store.sqlite'));
    const manifest = JSON.parse(execFileSync('python3', ['-c', 'import sys, zipfile; print(zipfile.ZipFile(sys.argv[1]).read("manifest.json").decode())', zip], { encoding: 'utf8' }));
    assert.equal(manifest.label, label, 'the artifact names the test');

    // Only the kept store is left.
    assert.deepEqual((await storesOf(server.url, `${runId}/`)).map((s) => s.id), [id]);
    await store.delete();
  });

  test('a server `larder up` started: the run leaves no store on it, before it stops', async (t) => {
    // A process that holds the server up after the sample (as another test process of the run would),
    // so that GET /stores can be asked once the sample has ended.
    const tmp = join(work, 'self-tmp');
    mkdirSync(tmp);
    const keeper = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
    t.after(() => keeper.kill());
    const env = sampleEnv({ TMPDIR: tmp, LARDER_FIXTURES: fixturesDir });
    const url = execFileSync(process.env.LARDER_BINARY, ['up', '--for', String(keeper.pid), '--fixtures', fixturesDir], { env, encoding: 'utf8' }).trim();

    const runId = `bg-self-${randomUUID()}`;
    const { run, entries, output } = await runSample('self', { 'passing.test.mjs': PASSING(5) }, {
      TMPDIR: tmp, LARDER_BINARY: process.env.LARDER_BINARY, LARDER_FIXTURES: fixturesDir, SAMPLE_SERVER: url, LARDER_RUN: runId,
    });
    assert.equal(run.code, 0, output);
    assert.match(run.stdout, /^# pass 5$/m, output);
    assert.deepEqual(Object.values(entries).map((e) => e.url), Array(5).fill(url), 'the sample used the server larder up started');
    assert.deepEqual(await storesOf(url, `${runId}/`), [], 'no store left');
    assert.doesNotMatch(output, /larder: /, 'nothing to report');

    const servers = sharedServers(tmp);
    assert.deepEqual(servers.map((s) => s.url), [url], 'one server');
    keeper.kill();
    await waitGone({ url, pid: servers[0].pid, folder: join(runsFolder(tmp), servers[0].key) }, 10_000);
  });

  test('with LARDER_URL, the run leaves no store on the server either', async () => {
    const runId = `bg-url-${randomUUID()}`;
    const { run, entries, output } = await runSample('url', { 'passing.test.mjs': PASSING(2 * BACKGROUND_MAX) }, {
      LARDER_URL: server.url, SAMPLE_SERVER: server.url, LARDER_RUN: runId,
    });
    assert.equal(run.code, 0, output);
    assert.equal(Object.keys(entries).length, 2 * BACKGROUND_MAX, output);
    assert.deepEqual(await storesOf(server.url, `${runId}/`), []);
    assert.doesNotMatch(output, /larder: /, 'nothing to report');
  });

  test('settle(), in an after hook of the file\'s own: the ready store and the passing tests\' stores are gone', async () => {
    const runId = `bg-settle-${randomUUID()}`;
    const { run, entries, output } = await runSample('settle', { 'settle.test.mjs': SETTLE }, {
      LARDER_URL: server.url, SAMPLE_SERVER: server.url, LARDER_RUN: runId,
    });
    assert.equal(run.code, 0, output);
    assert.deepEqual(entries['after settle'].left, [], output);
  });

  test('passing tests\' stores go in batches, deleted by their label', async (t) => {
    const { url, requests } = await proxy(t, () => false);
    const runId = `bg-batch-${randomUUID()}`;
    const tests = 3 * DELETE_BATCH + 1;
    const { run, output } = await runSample('batch', { 'passing.test.mjs': PASSING(tests) }, {
      LARDER_URL: url, SAMPLE_SERVER: server.url, LARDER_RUN: runId,
    });
    assert.equal(run.code, 0, output);
    assert.deepEqual(await storesOf(server.url, `${runId}/`), [], 'none left');
    const deletes = requests.filter((r) => r.method === 'DELETE');
    const byLabel = deletes.filter((r) => r.url.startsWith('/stores?label='));
    assert.ok(byLabel.length > 0, `batches deleted by label: ${JSON.stringify(deletes)}`);
    for (const r of byLabel) {
      assert.ok(decodeURIComponent(r.url.replace(/\+/g, ' ')).startsWith(`/stores?label=${runId}/passing.test.mjs/(made ready for the next test) `), r.url);
    }
    assert.ok(deletes.length < tests, `fewer deletes than tests: ${deletes.length}`);

    // A run prefix so long that the label made ready is cut: each batch's label still its own.
    const longRun = `bg-long-${randomUUID()}-${'x'.repeat(250)}`;
    const long = await runSample('batch-long', { 'alive.test.mjs': ALIVE(tests) }, {
      LARDER_URL: server.url, SAMPLE_SERVER: server.url, LARDER_RUN: longRun,
    });
    assert.equal(long.run.code, 0, long.output);
    assert.equal(Object.keys(long.entries).length, tests, long.output);
    assert.deepEqual(await storesOf(server.url, longRun.slice(0, 100)), []);
  });

  test('a failed test whose keep is refused: its batch goes store by store, and its store stays', async (t) => {
    // A proxy that refuses to keep stores.
    const { url } = await proxy(t, (req) => req.method === 'PATCH', 'the proxy refuses to keep');
    const runId = `bg-unkept-${randomUUID()}`;
    const { run, entries, output } = await runSample('unkept', { 'kept.test.mjs': KEPT }, {
      LARDER_URL: url, SAMPLE_SERVER: server.url, LARDER_RUN: runId,
    });
    assert.equal(run.code, 1, output);
    const { id } = entries['fails with a ready store'];
    assert.match(output, new RegExp(`larder: cleanup of store ${id} failed: the proxy refuses to keep`));
    // Still on the server, though it kept the label of its batch, whose other store is gone.
    const left = await storesOf(server.url, `${runId}/`);
    assert.deepEqual(left.map((s) => s.id), [id], output);
    await new Larder({ url: server.url }).request('DELETE', `/stores/${id}`);
  });

  test('a background delete that fails is reported, naming the store', async (t) => {
    const { url } = await proxy(t, (req) => req.method === 'DELETE', 'the proxy refuses deletes');
    const runId = `bg-refused-${randomUUID()}`;
    const { run, entries, output } = await runSample('refused', { 'passing.test.mjs': PASSING(1) }, {
      LARDER_URL: url, SAMPLE_SERVER: server.url, LARDER_RUN: runId,
    });
    // The test passed, as it did: a cleanup never turns a result around.
    assert.equal(run.code, 0, output);
    assert.match(run.stdout, /^# pass 1$/m, output);
    const { id } = entries['passes 1'];
    // As a warning of the test process (the test itself was reported before the delete was sent),
    // which node --test shows in its output: the test's store, and the one made ready for a next test.
    const left = await storesOf(server.url, `${runId}/`);
    assert.equal(left.length, 2, JSON.stringify(left));
    const ready = left.find((s) => s.id !== id);
    for (const store of [id, ready.id]) {
      assert.match(output, new RegExp(`\\[LARDER_CLEANUP\\] Warning: larder: cleanup of store ${store} failed: the proxy refuses deletes`));
    }

    // Both are gone by hand.
    for (const store of left) await new Larder({ url: server.url }).request('DELETE', `/stores/${store.id}`);
  });
});

/**
 * A proxy in front of this file's server, closed after test `t`: it answers a 500 saying `message` to
 * the requests `refuse` picks and passes the others on. Answers {url, requests: [{method, url}]}.
 */
async function proxy(t, refuse, message) {
  const requests = [];
  const { port, hostname } = new URL(server.url);
  const front = createServer((req, res) => {
    requests.push({ method: req.method, url: req.url });
    if (refuse(req)) {
      req.resume();
      res.writeHead(500, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ error: { code: 'internal', message, details: {} } }));
      return;
    }
    const upstream = httpRequest({ host: hostname, port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise((resolvePromise) => front.listen(0, '127.0.0.1', resolvePromise));
  t.after(() => front.close());
  return { url: `http://127.0.0.1:${front.address().port}`, requests };
}
