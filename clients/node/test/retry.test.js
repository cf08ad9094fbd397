// A `larder up` that fails is run again, and its failure is not kept for the
// process (issue 43: a `larder up` that joined a server as it stopped failed,
// and every later test of that process failed with it). Sample processes run
// with a TMPDIR of their own, as in up.test.js.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { makeProject, runNode, runsFolder, sampleEnv } from './project.js';

// A larder that logs each run's arguments to $0.ran and fails its first
// $FAILS runs (saying which on stderr); then it is $REAL when that is set,
// else it prints $ANSWER and exits 0.
const SCRIPTED = `#!/bin/sh
echo "$*" >> "$0.ran"
runs=$(wc -l < "$0.ran")
if [ "$runs" -le "\${FAILS:-0}" ]; then
    echo "scripted larder: failure $runs" >&2
    exit 2
fi
if [ -n "$REAL" ]; then exec "$REAL" "$@"; fi
echo "$ANSWER"
`;

// Asks for the helper's client twice in one process; prints what each call gave.
const TWICE = `
import { defaultLarder } from 'larder-sqlite/test';
const calls = [];
for (let i = 0; i < 2; i += 1) {
  try {
    calls.push({ url: (await defaultLarder()).url });
  } catch (err) {
    calls.push({ error: { code: err.code, message: err.message, details: err.details } });
  }
}
console.log(JSON.stringify({ pid: process.pid, calls }));
`;

// Two tests in one test process: the first needs a store while `larder up` fails, the second once it answers.
const RETRIED = `
import { test } from 'node:test';
import { withStore } from 'larder-sqlite/test';

test('while larder up fails', async (t) => {
  await withStore(t, {});
});

test('once larder up answers', async (t) => {
  const store = await withStore(t, {});
  if (!store.id) throw new Error('no store');
});
`;

// One process of the back-to-back rounds: the helper's client, a store, its server's URL.
const CHILD = `
import { defaultLarder } from 'larder-sqlite/test';
const larder = await defaultLarder();
const store = await larder.createStore({ label: 'back-to-back' });
console.log(JSON.stringify({ url: larder.url, store: store.id }));
`;

// How long each round waits after the last one's processes ended: across the
// moment the server they leave stops (a second after them), so that some
// rounds' `larder up` joins it as it stops.
const ROUND_GAPS_MS = [0, 800, 900, 950, 1000, 1050, 1100, 1200, 0];

let work;

before(() => {
  work = mkdtempSync(join(tmpdir(), 'larder-node-retry-'));
});

after(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

function scripted(name) {
  const dir = join(work, name);
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'larder');
  writeFileSync(file, SCRIPTED);
  chmodSync(file, 0o755);
  return file;
}

function runs(file) {
  return existsSync(`${file}.ran`) ? readFileSync(`${file}.ran`, 'utf8').trim().split('\n').filter(Boolean) : [];
}

async function twice(name, env) {
  const project = makeProject(join(work, name), { files: { 'twice.mjs': TWICE } });
  const run = await runNode(project, ['twice.mjs'], sampleEnv({ TMPDIR: work, ...env }));
  assert.equal(run.code, 0, run.output);
  return JSON.parse(run.stdout.trim().split('\n').pop());
}

/** Waits (up to `limitMs`) until no server's folder is left under TMPDIR `tmp`. */
async function waitNoServers(tmp, limitMs) {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const left = existsSync(runsFolder(tmp)) ? readdirSync(runsFolder(tmp)) : [];
    if (left.length === 0) return;
    if (Date.now() > deadline) throw new Error(`after ${limitMs} ms, ${runsFolder(tmp)} still holds ${left.join(', ')}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('a failed `larder up`', () => {
  test('is run again, and its URL kept once it answers', async () => {
    const binary = scripted('fails-once');
    const { pid, calls } = await twice('fails-once', { LARDER_BINARY: binary, FAILS: '1', ANSWER: 'http://127.0.0.1:9' });
    assert.deepEqual(calls, [{ url: 'http://127.0.0.1:9' }, { url: 'http://127.0.0.1:9' }]);
    assert.deepEqual(runs(binary), Array(2).fill(`up --for ${pid}`));
  });

  test('is tried three times, and the failure is not kept: the next call runs it anew', async () => {
    const binary = scripted('fails-always');
    const { pid, calls } = await twice('fails-always', { LARDER_BINARY: binary, FAILS: '1000' });
    for (const [i, call] of calls.entries()) {
      assert.equal(call.error?.code, 'server_start_failed', JSON.stringify(call));
      // What the last run said, as before.
      assert.equal(call.error.message, `Larder: \`${binary} up --for ${pid}\` failed: scripted larder: failure ${3 * (i + 1)}`);
      assert.equal(call.error.details.exitCode, 2);
      assert.equal(call.error.details.attempts, 3);
    }
    assert.equal(runs(binary).length, 6);
  });

  test('is not run again when it answered without a URL, or could not run', async () => {
    const binary = scripted('no-url');
    const answered = await twice('no-url', { LARDER_BINARY: binary, ANSWER: 'ready' });
    for (const call of answered.calls) {
      assert.match(call.error?.message ?? '', /printed no URL: "ready\\n"$/, JSON.stringify(call));
      assert.equal(call.error.details.attempts, 1);
    }
    assert.equal(runs(binary).length, 2, 'once per call');

    const missing = join(work, 'not-there', 'larder');
    const notRun = await twice('not-there', { LARDER_BINARY: missing });
    for (const call of notRun.calls) {
      assert.match(call.error?.message ?? '', /cannot run .*ENOENT/, JSON.stringify(call));
      assert.equal(call.error.details.attempts, 1);
    }
  });

  test('in a node --test run, the next test runs it again and gets its store', async () => {
    const binary = scripted('flaky');
    const project = makeProject(join(work, 'flaky'), { files: { 'retried.test.mjs': RETRIED } });
    const tmp = join(work, 'flaky-tmp');
    mkdirSync(tmp);
    const env = sampleEnv({ LARDER_BINARY: binary, FAILS: '3', REAL: process.env.LARDER_BINARY, TMPDIR: tmp });
    const run = await runNode(project, ['--test', '--test-reporter=tap', 'retried.test.mjs'], env);
    assert.equal(run.code, 1, run.output);
    assert.match(run.stdout, /^not ok \d+ - while larder up fails$/m, run.output);
    assert.match(run.stdout, /scripted larder: failure 3/, run.output);
    assert.match(run.stdout, /^ok \d+ - once larder up answers$/m, run.output);
    assert.equal(runs(binary).length, 4, 'three failed runs for the first test, one for the second');
    await waitNoServers(tmp, 5_000);
  });
});

test('back-to-back runs while the server stops: every process gets its store', async (t) => {
  // Rounds of two processes at once, each round right after the last one's
  // processes ended, whether it joins the server running, one stopping, or none.
  const project = makeProject(join(work, 'back-to-back'), { files: { 'child.mjs': CHILD } });
  const tmp = join(work, 'back-to-back-tmp');
  mkdirSync(tmp);
  const env = sampleEnv({ LARDER_BINARY: process.env.LARDER_BINARY, TMPDIR: tmp });
  const urls = new Set();
  let ended = Date.now();
  for (const [round, gap] of ROUND_GAPS_MS.entries()) {
    await new Promise((r) => setTimeout(r, Math.max(0, ended + gap - Date.now())));
    const children = await Promise.all([0, 1].map(() => runNode(project, ['child.mjs'], env, 60_000)));
    ended = Date.now();
    for (const [i, child] of children.entries()) {
      assert.equal(child.code, 0, `round ${round}, child ${i}: ${child.output}`);
      urls.add(JSON.parse(child.stdout.trim().split('\n').pop()).url);
    }
  }
  await waitNoServers(tmp, 5_000);
  t.diagnostic(`${ROUND_GAPS_MS.length} rounds of two processes back to back: ${urls.size} servers`);
});
