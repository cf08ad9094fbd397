// Sample projects for the tests of a server the helper starts itself: a
// folder with a package.json, the gallery fixtures, test files, and
// larder-sqlite either linked to this client or installed from a tarball;
// run with `node` (or `node --test`) in a subprocess with an environment
// of its own.

import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { RUN_VARIABLES } from 'larder-sqlite/test';
import { fixturesDir } from './support.js';

/** Every variable a label's run prefix may come from (RUN_VARIABLES, both names of each pair). */
export const RUN_VARIABLE_NAMES = [...new Set(RUN_VARIABLES.flat().filter(Boolean))];

export const clientDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** A project at `dir`: package.json, fixtures/gallery, `files` ({name: source}); `link`: node_modules/larder-sqlite -> this client. */
export function makeProject(dir, { files = {}, link = true } = {}) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'sample', version: '1.0.0', private: true, type: 'module' }, null, 2) + '\n');
  cpSync(join(fixturesDir, 'gallery'), join(dir, 'fixtures', 'gallery'), { recursive: true });
  if (link) {
    mkdirSync(join(dir, 'node_modules'), { recursive: true });
    symlinkSync(clientDir, join(dir, 'node_modules', 'larder-sqlite'), 'dir');
  }
  for (const [name, source] of Object.entries(files)) writeFileSync(join(dir, name), source);
  return dir;
}

/**
 * The environment a sample runs in: this one without anything that says
 * where a server is, that it runs inside a test runner, a token, or a run
 * prefix for the labels (LARDER_RUN, a CI system's run id); then `set` (a
 * value of undefined removes the variable).
 */
export function sampleEnv(set = {}) {
  const env = { ...process.env };
  for (const name of ['LARDER_URL', 'LARDER_BINARY', 'LARDER_FIXTURES', 'LARDER_TOKEN', 'LARDER_ARTIFACTS', 'LARDER_MODE', 'NODE_TEST_CONTEXT', 'JEST_WORKER_ID', 'NODE_OPTIONS', ...RUN_VARIABLE_NAMES]) {
    delete env[name];
  }
  for (const [name, value] of Object.entries(set)) {
    if (value === undefined) delete env[name];
    else env[name] = value;
  }
  return env;
}

/** A folder holding only a link to this node: a PATH on which there is no larder. */
export function pathWithoutLarder(dir) {
  mkdirSync(dir, { recursive: true });
  if (!existsSync(join(dir, 'node'))) symlinkSync(process.execPath, join(dir, 'node'));
  return dir;
}

/** Runs node with `args` in `cwd`; answers {code, stdout, stderr, output, startedAt}. */
export function runNode(cwd, args, env, timeout = 120_000) {
  return new Promise((resolvePromise) => {
    const startedAt = Date.now();
    execFile(process.execPath, args, { cwd, env, timeout, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      const code = error ? (error.code ?? error.signal) : 0;
      resolvePromise({ code, stdout, stderr, startedAt, output: `exit ${code}\n--- stdout\n${stdout}\n--- stderr\n${stderr}` });
    });
  });
}

/** Reads a file of JSON lines (none when it does not exist). */
export function jsonLines(file) {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8').trim().split('\n').filter(Boolean).map((line) => JSON.parse(line));
}

/** `larder up`'s folder for this user under TMPDIR `tmp`: ${tmp}/larder-UID. */
export function runsFolder(tmp) {
  return join(tmp, `larder-${process.getuid()}`);
}

/** The servers `larder up` runs under TMPDIR `tmp`: [{key, url, pid}] from each KEY/server.json. */
export function sharedServers(tmp) {
  const folder = runsFolder(tmp);
  if (!existsSync(folder)) return [];
  const servers = [];
  for (const key of readdirSync(folder)) {
    const file = join(folder, key, 'server.json');
    if (existsSync(file)) servers.push({ key, ...JSON.parse(readFileSync(file, 'utf8')) });
  }
  return servers;
}

export function isRunning(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

/**
 * Waits until the server of pid `pid` has ended and `folder` is gone, then
 * checks that `url` no longer answers (asked only then: a connection kept
 * open to it would hold up its stopping); answers the milliseconds the
 * wait took, or throws after `limitMs`.
 */
export async function waitGone({ url, pid, folder }, limitMs) {
  const started = Date.now();
  for (;;) {
    const running = isRunning(pid);
    const present = existsSync(folder);
    if (!running && !present) break;
    if (Date.now() - started > limitMs) {
      throw new Error(`after ${limitMs} ms: server pid ${pid} ${running ? 'runs' : 'ended'}, ${folder} ${present ? 'is still there' : 'is gone'}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  const took = Date.now() - started;
  let answered = false;
  try {
    answered = (await fetch(`${url}/health`, { signal: AbortSignal.timeout(2_000) })).ok;
  } catch {}
  if (answered) throw new Error(`${url} still answers after its process ${pid} ended`);
  return took;
}
