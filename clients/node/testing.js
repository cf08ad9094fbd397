// The node:test helper (larder-sqlite/test): each test its own store, deleted after a pass and
// kept, with its artifact saved, after a failure; the README says how and why.

import * as nodeTest from 'node:test';
import { AsyncLocalStorage } from 'node:async_hooks';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { accessSync, chmodSync, constants as fsConstants, existsSync, realpathSync, statSync, writeSync } from 'node:fs';
import { delimiter, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Larder, LarderError, formatCheckFailure, resolveMode, snapshotFiles } from './index.js';

// Shared with the other clients (clients/defaults.json).
export const DEFAULT_ARTIFACTS_DIR = 'larder-artifacts';
export const ARTIFACT_NAME_MAX = 120;
// [variable, condition]: a CI system's run id counts only on that system, where its condition
// variable is set too (an empty name: no condition).
export const RUN_VARIABLES = Object.freeze(
  [
    ['LARDER_RUN', ''],
    ['GITHUB_RUN_ID', 'GITHUB_ACTIONS'],
    ['CI_PIPELINE_ID', 'GITLAB_CI'],
    ['BUILDKITE_BUILD_ID', 'BUILDKITE'],
    ['BUILD_TAG', 'JENKINS_URL'],
    ['CIRCLE_WORKFLOW_ID', 'CIRCLECI'],
  ].map((pair) => Object.freeze(pair))
);
// The longest label the server takes; a longer one is cut to it.
export const LABEL_MAX_BYTES = 256;

const states = new WeakMap();

function stateOf(t) {
  let state = states.get(t);
  if (!state) {
    state = { failed: false, wrapped: false, parent: null, tracked: false, pending: 0 };
    states.set(t, state);
  }
  return state;
}

function markFailed(t) {
  for (let state = stateOf(t); state; state = state.parent && stateOf(state.parent)) {
    state.failed = true;
  }
}

/**
 * Whether the test of context `t` has failed so far. node:test tells an after hook nothing, so
 * this reads t.passed (Node 20.12+), the failures this module saw itself, and t.signal.
 */
export function testFailed(t) {
  const state = states.get(t);
  if (state?.failed || state?.pending > 0) return true;
  if (t.passed === false) return true;
  return Boolean(t.signal?.aborted);
}

/** A file-name-safe form of a test name: [A-Za-z0-9._-], at most ARTIFACT_NAME_MAX characters. */
export function fileSafeName(name) {
  let safe = String(name ?? '').replace(/[^A-Za-z0-9._-]/g, '_').replace(/^\.+|\.+$/g, '');
  if (safe.length > ARTIFACT_NAME_MAX) safe = safe.slice(0, ARTIFACT_NAME_MAX);
  return safe || 'test';
}

// A test function whose failure is recorded for `t`, keeping the arity node:test reads (two
// parameters: callback style).
function wrapFn(fn, parent) {
  if (typeof fn !== 'function') return fn;
  const enter = (t) => {
    const state = stateOf(t);
    state.wrapped = true;
    if (parent) state.parent = parent;
    track(t);
    // A subtest that fails leaves its parent's `passed` true until later:
    // tell the parent from the subtest's own after hook.
    if (parent) t.after(() => { if (testFailed(t)) markFailed(parent); });
  };
  if (fn.length >= 2) {
    return named(function (t, done) {
      enter(t);
      try {
        return fn.call(this, t, (err) => {
          if (err) markFailed(t);
          done(err);
        });
      } catch (err) {
        markFailed(t);
        throw err;
      }
    }, fn);
  }
  return named(async function (t) {
    enter(t);
    try {
      return await fn.call(this, t);
    } catch (err) {
      markFailed(t);
      throw err;
    }
  }, fn);
}

// node:test names a test or suite given no name after its function: keep the name.
function named(wrapper, fn) {
  try {
    Object.defineProperty(wrapper, 'name', { value: fn.name, configurable: true });
  } catch {}
  return wrapper;
}

function wrapArgs(args, parent) {
  const i = args.findLastIndex((a) => typeof a === 'function');
  if (i < 0) return args;
  // A failing todo subtest does not fail its parent: leave it alone.
  if (parent && args.some((a) => a && typeof a === 'object' && a.todo)) return args;
  const copy = [...args];
  copy[i] = wrapFn(copy[i], parent);
  return copy;
}

// Subtests of `t` report their failures to `t`.
function track(t) {
  const state = stateOf(t);
  if (state.tracked || typeof t.test !== 'function') return;
  state.tracked = true;
  const original = t.test;
  try {
    t.test = function (...args) {
      // A subtest still running when its parent's after hooks run was not
      // awaited: node:test cancels it and fails the parent afterwards.
      state.pending += 1;
      const done = () => { state.pending -= 1; };
      let result;
      try {
        result = original.apply(t, wrapArgs(args, t));
      } catch (err) {
        done();
        throw err;
      }
      if (result && typeof result.then === 'function') result.then(done, done);
      else done();
      return result;
    };
  } catch {
    // A context that cannot take the property: subtests are not tracked.
  }
}

function wrapRunner(run) {
  const wrapped = (...args) => run(...wrapArgs(args, null));
  for (const variant of ['skip', 'todo', 'only']) {
    if (typeof run[variant] === 'function') wrapped[variant] = (...args) => run[variant](...wrapArgs(args, null));
  }
  return wrapped;
}

/** node:test's `test` (and its skip, todo and only), whose failures withStore sees on every Node version. */
export const test = wrapRunner(nodeTest.test);
/** node:test's `it`, wrapped as `test` is. */
export const it = wrapRunner(nodeTest.it);
export { before, after, beforeEach, afterEach } from 'node:test';

// The names of this module's describe()s around a test, for a Node whose TestContext has no
// fullName: node:test runs a test in the async context it was made in.
const suiteNames = new AsyncLocalStorage();

function wrapSuite(run) {
  const suiteArgs = (args) => {
    const i = args.findLastIndex((a) => typeof a === 'function');
    if (i < 0) return args;
    const fn = args[i];
    const name = typeof args[0] === 'string' ? args[0] : fn.name || '<anonymous>';
    const names = [...(suiteNames.getStore() ?? []), name];
    const copy = [...args];
    copy[i] = named(function (...a) {
      return suiteNames.run(names, () => fn.apply(this, a));
    }, fn);
    return copy;
  };
  const wrapped = (...args) => run(...suiteArgs(args));
  for (const variant of ['skip', 'todo', 'only']) {
    if (typeof run[variant] === 'function') wrapped[variant] = (...args) => run[variant](...suiteArgs(args));
  }
  return wrapped;
}

/** node:test's `describe` (and its skip, todo and only), which lets labels name suites where t.fullName is missing. */
export const describe = wrapSuite(nodeTest.describe);

// Labels: RUN/PACKAGE/TEST, as every client's helper makes them (clients/README.md, "How a
// test helper labels its stores"), so that a CI run's stores can be found and removed at once.

const SELF = fileURLToPath(import.meta.url);

/** The run prefix of the labels: configure({run}), else the first of RUN_VARIABLES set in `env`, else null. */
export function runPrefix(env = process.env) {
  if (typeof settings.run === 'string' && settings.run !== '') return settings.run;
  for (const [name, condition] of RUN_VARIABLES) {
    if (env[name] && (!condition || env[condition])) return env[name];
  }
  return null;
}

/** `label` cut to `maxBytes` of UTF-8 at a character boundary, keeping its start. */
export function cutLabel(label, maxBytes = LABEL_MAX_BYTES) {
  const bytes = Buffer.from(String(label), 'utf8');
  if (bytes.length <= maxBytes) return String(label);
  let end = maxBytes;
  while (end > 0 && (bytes[end] & 0xc0) === 0x80) end -= 1; // a continuation byte: back to its lead
  return bytes.subarray(0, end).toString('utf8');
}

// The file of the outermost stack frame outside this module, Node's own
// code and node_modules: the test file that called (or registered) us.
function callerFile() {
  const { prepareStackTrace, stackTraceLimit } = Error;
  let sites = [];
  try {
    Error.stackTraceLimit = 100;
    Error.prepareStackTrace = (_, callSites) => callSites;
    const holder = {};
    Error.captureStackTrace(holder, callerFile);
    sites = Array.isArray(holder.stack) ? holder.stack : [];
  } catch {
    sites = [];
  } finally {
    Error.prepareStackTrace = prepareStackTrace;
    Error.stackTraceLimit = stackTraceLimit;
  }
  let found = null;
  for (const site of sites) {
    let file = site?.getFileName?.() ?? site?.getScriptNameOrSourceURL?.();
    if (!file) continue;
    if (file.startsWith('file:')) {
      try {
        file = fileURLToPath(file);
      } catch {
        continue;
      }
    }
    if (file.startsWith('node:') || !(file.startsWith('/') || /^[A-Za-z]:[\\/]/.test(file) || file.startsWith('\\\\'))) continue;
    if (file === SELF || file.split(/[\\/]/).includes('node_modules')) continue;
    found = file;
  }
  return found;
}

const relatives = new Map(); // `${cwd}\0${file}` -> relativeToCwd(file), where no real path was asked

// `file` relative to the working directory, with `/` (through real paths when
// the path as given lies outside it: a symbolic link).
function relativeToCwd(file) {
  if (file.startsWith('file:')) file = fileURLToPath(file);
  const cwd = process.cwd();
  // The same file for every test of a file: worked out once (not where real paths are asked).
  const key = `${cwd}\0${file}`;
  const known = relatives.get(key);
  if (known !== undefined) return known;
  let rel = relative(cwd, resolve(file));
  if (!rel.startsWith('..')) {
    const found = (rel || file).split(sep).join('/');
    if (relatives.size >= 1000) relatives.clear();
    relatives.set(key, found);
    return found;
  }
  try {
    const real = relative(realpathSync(cwd), realpathSync(file));
    if (!real.startsWith('..')) rel = real;
  } catch {}
  return (rel || file).split(sep).join('/');
}

function testFile(t, fallback) {
  if (typeof t?.filePath === 'string' && t.filePath) return t.filePath;
  if (process.env.NODE_TEST_CONTEXT && process.argv[1]) return process.argv[1];
  return fallback() || process.argv[1] || null;
}

function testNamePath(t) {
  if (typeof t?.fullName === 'string' && t.fullName) return t.fullName;
  const parent = states.get(t)?.parent;
  if (parent) return `${testNamePath(parent)} > ${t.name}`;
  return [...(suiteNames.getStore() ?? []), String(t?.name ?? '')].join(' > ');
}

// `name`: the TEST part, when not the test's own name path; `file`: the test file and `run` the run
// prefix, when known.
function labelOf(t, fallbackFile, name, file = testFile(t, fallbackFile), run = runPrefix()) {
  const parts = [run, file && relativeToCwd(file), name ?? testNamePath(t)].filter(Boolean);
  return cutLabel(parts.join('/'));
}

/**
 * The label the helper gives the store of the test of context `t`. Call it from the test: where
 * the context does not name its file, the caller's stack does.
 */
export function storeLabel(t) {
  return labelOf(t, callerFile);
}

// The server: the URL given, else the one `larder up` prints, so that every process of a run
// shares one server (clients/README.md, "Where a test helper's server comes from").

/** The one sentence when there is neither a URL nor a binary. */
const NO_SERVER =
  "Larder: no server to use: set LARDER_URL to a running server's URL, or install the larder binary (set LARDER_BINARY to it, or put it on PATH)";

// `larder up` may wait its turn on the run's lock, then for the server it starts.
const UP_TIMEOUT_MS = 120_000;
// A `larder up` that joins a server as it stops fails, and a moment later starts a new one:
// run it again after these pauses (issue 43).
const UP_RETRY_DELAYS_MS = [200, 500];

const SETTINGS = ['url', 'token', 'timeoutMs', 'binary', 'fixtures', 'serverArgs', 'run', 'mode'];
let settings = {};
let sharedClient = null; // Promise<Larder>, made at first need

/**
 * Settings of the client the helper makes when a test names none, and of the server it starts;
 * calling it again drops the client made so far.
 */
export function configure(options = {}) {
  for (const key of Object.keys(options ?? {})) {
    if (!SETTINGS.includes(key)) throw new TypeError(`configure: unknown option '${key}'; known: ${SETTINGS.join(', ')}`);
  }
  if (options?.serverArgs !== undefined && !(Array.isArray(options.serverArgs) && options.serverArgs.every((a) => typeof a === 'string'))) {
    throw new TypeError('configure: serverArgs must be an array of strings');
  }
  if (options?.run !== undefined && options.run !== null && typeof options.run !== 'string') {
    throw new TypeError('configure: run must be a string (the run prefix of the labels)');
  }
  if (options?.mode !== undefined && options.mode !== null && !['local', 'remote'].includes(options.mode)) {
    throw new TypeError(`configure: mode must be 'remote' or 'local', not ${JSON.stringify(options.mode)}`);
  }
  settings = { ...options };
  sharedClient = null;
}

/**
 * The client withStore and testSnapshots use when given none, made once per process. A failure
 * is not kept, so that a server that could not start this time is tried again by the next test.
 */
export function defaultLarder() {
  if (!sharedClient) {
    const made = makeDefaultClient();
    sharedClient = made;
    made.catch(() => {
      // Unless configure() replaced it meanwhile.
      if (sharedClient === made) sharedClient = null;
    });
  }
  return sharedClient;
}

async function makeDefaultClient() {
  const { url, token, timeoutMs } = settings;
  const given = url || process.env.LARDER_URL;
  // A server the helper starts is local unless remote mode is asked for; a bad LARDER_MODE fails
  // before one is started.
  const mode = resolveMode({ mode: settings.mode, url: given || null });
  return new Larder({ url: given || (await startServer()), token, timeoutMs, mode });
}

function isExecutableFile(path) {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

// The binary this package ships for this platform, if it does.
function packagedBinary() {
  const name = process.platform === 'win32' ? 'larder.exe' : 'larder';
  const file = fileURLToPath(new URL(`./server/${process.platform}-${process.arch}/${name}`, import.meta.url));
  if (!existsSync(file)) return null;
  if (!isExecutableFile(file)) {
    // An installer that dropped the executable bit.
    try {
      chmodSync(file, 0o755);
    } catch {}
  }
  return file;
}

function onPath(name) {
  const names = process.platform === 'win32' ? [`${name}.exe`, `${name}.cmd`, name] : [name];
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    for (const n of names) {
      const candidate = join(dir, n);
      if (isExecutableFile(candidate)) return candidate;
    }
  }
  return null;
}

// [binary, where it came from], or null.
function findBinary() {
  if (settings.binary) return [settings.binary, 'the binary option'];
  if (process.env.LARDER_BINARY) return [process.env.LARDER_BINARY, 'LARDER_BINARY'];
  const packaged = packagedBinary();
  if (packaged) return [packaged, 'the larder-sqlite package'];
  const found = onPath('larder');
  return found ? [found, 'PATH'] : null;
}

// The process that runs the test processes and outlives them, so that test files run one after
// another keep one server: node --test's runner (NODE_TEST_CONTEXT), Jest's (JEST_WORKER_ID).
function runnerPid() {
  const ppid = process.ppid;
  if (!ppid || ppid <= 1) return null;
  if (process.env.NODE_TEST_CONTEXT) return ppid;
  if (process.env.JEST_WORKER_ID && typeof process.send === 'function') return ppid;
  return null;
}

// `larder up`, run again after each of UP_RETRY_DELAYS_MS while it exits
// non-zero; rejects with its last run's error (details.attempts: how many runs).
async function startServer() {
  const found = findBinary();
  if (!found) throw new LarderError(NO_SERVER, { code: 'no_server' });
  const [binary, source] = found;
  const args = ['up', '--for', String(process.pid)];
  const runner = runnerPid();
  if (runner) args.push('--for', String(runner));
  const fixtures = settings.fixtures || process.env.LARDER_FIXTURES;
  if (fixtures) args.push('--fixtures', resolve(fixtures));
  if (settings.serverArgs) args.push(...settings.serverArgs);
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await runUp(binary, source, args);
    } catch (err) {
      if (err?.details) err.details.attempts = attempt;
      // Only an exit status says it could not start a server this time: not a binary that cannot run, nor a timeout.
      const exitCode = err?.details?.exitCode;
      if (typeof exitCode !== 'number' || exitCode === 0 || attempt > UP_RETRY_DELAYS_MS.length) throw err;
      await new Promise((resolveDelay) => setTimeout(resolveDelay, UP_RETRY_DELAYS_MS[attempt - 1]));
    }
  }
}

// One run of `binary up ARGS`: the URL it prints.
function runUp(binary, source, args) {
  const command = `${binary} ${args.join(' ')}`;
  return new Promise((resolvePromise, reject) => {
    execFile(
      binary,
      args,
      { cwd: process.cwd(), env: process.env, encoding: 'utf8', timeout: UP_TIMEOUT_MS, windowsHide: true },
      (error, stdout, stderr) => {
        const details = { binary, source, args, stderr: String(stderr ?? '') };
        if (error) {
          const why = stderr?.trim()
            ? stderr.trim()
            : error.killed
              ? `no answer within ${UP_TIMEOUT_MS} ms`
              : error.code === 'ENOENT' || error.code === 'EACCES'
                ? `cannot run ${binary} (from ${source}): ${error.message}`
                : error.message;
          details.exitCode = typeof error.code === 'number' ? error.code : null;
          reject(new LarderError(`Larder: \`${command}\` failed: ${why}`, { code: 'server_start_failed', details, cause: error }));
          return;
        }
        const url = String(stdout).trim().split('\n').pop()?.trim() ?? '';
        if (!/^https?:\/\/\S+$/.test(url)) {
          reject(new LarderError(`Larder: \`${command}\` printed no URL: ${JSON.stringify(String(stdout).slice(0, 200))}`, { code: 'server_start_failed', details }));
          return;
        }
        resolvePromise(url);
      }
    );
  });
}

/**
 * A store for the test of context `t` (createStore's options, plus `larder` and `artifacts`): deleted
 * after a pass, kept with its artifact saved after a failure, so that a failure can be looked into.
 * In local mode the next store of the same spec is made ready in the background, and a passing
 * test's store is deleted in the background (see "What the helper does in the background").
 */
export async function withStore(t, options = {}) {
  if (!t || typeof t.after !== 'function') {
    throw new TypeError('withStore(t, options): t must be the node:test TestContext (Node 18.13+ for t.after)');
  }
  const { larder, artifacts, ...createOptions } = options;
  const state = stateOf(t);
  if (typeof t.passed !== 'boolean' && !state.wrapped) {
    throw new Error(
      `withStore: Node ${process.version} cannot tell in t.after whether a test failed (TestContext.passed ` +
        "came with Node 20.12); run the test through `test` or `it` from 'larder-sqlite/test' instead of node:test's."
    );
  }
  track(t);
  // Before the first await: the caller's stack still holds the test file.
  const file = testFile(t, callerFile);
  const run = runPrefix();
  const label = createOptions.label === undefined ? labelOf(t, null, undefined, file, run) : createOptions.label;
  const client = larder ?? (await defaultLarder());
  const spec = readySpec(client, createOptions, label);
  const taken = spec ? await takeReady(client, spec) : null; // {store, batch}
  const fromReady = taken !== null;
  let store;
  if (fromReady) {
    store = taken.store;
    store.info = { ...store.info, label };
  } else {
    store = await client.createStore({ ...createOptions, label });
  }

  // The next store is made ready once the test has begun, its first steps first; or, when the test
  // is over by then, once its end's own work is done, so that a failed test's keep and artifact do
  // not wait behind it.
  const work = { ended: false, go: null };
  work.gate = new Promise((resolveGate) => {
    work.go = resolveGate;
  });
  if (spec) setImmediate(() => work.ended || work.go());
  if (spec) makeReady(client, spec, createOptions, labelOf(t, null, READY_NAME, file, run), work.gate);
  const relabel = fromReady ? relabelLater(client, store, label, createOptions.ttlSeconds) : null;

  t.after(async () => {
    work.ended = true;
    const relabelled = relabel?.end(); // the relabelling under way, if it was sent
    if (spec && !testFailed(t)) {
      // Passed: deleted in the background: with the rest of its batch, when it still has its batch's
      // label; else on its own, after its relabelling (a bounded number at a time).
      work.go();
      if (fromReady) decide(taken.batch, relabelled ? null : store);
      if (!fromReady || relabelled) {
        inBackground(async () => {
          await relabelled;
          // Sent once the next test has begun, alongside its own first steps.
          await new Promise((resolveTurn) => setImmediate(resolveTurn));
          await deleteStore(client, store);
        }, (err) => cleanupFailed(t, store, err));
      }
      await roomInBackground();
      return;
    }
    try {
      if (testFailed(t)) {
        // Remote mode: the test's changes are in its local copy; hand them back first.
        if (store.remote) {
          try {
            await store.checkIn();
          } catch (err) {
            const message = `larder: the check-in of store ${store.id}'s local copy failed, so the kept store and its artifact are as last checked in: ${err?.message ?? err}`;
            t.diagnostic(message);
            process.emitWarning(message, { code: 'LARDER_CHECK_IN' });
          }
        }
        // A ready store is kept under the test's label (its relabelling may not have been sent, or
        // have failed), once a relabelling sent, which sets a ttl, is over; past the client's fence.
        if (fromReady) {
          await relabelled;
          try {
            store.info = (await internals.send(client, 'PATCH', store.base, { body: { keep: true, label } })).body;
          } catch (err) {
            // It may still have its batch's label: the batch is not deleted by label then.
            taken.batch.poisoned = true;
            throw err;
          } finally {
            decide(taken.batch, null);
          }
        } else {
          await store.keep();
        }
        const dir = resolve(artifacts ?? (process.env.LARDER_ARTIFACTS || DEFAULT_ARTIFACTS_DIR));
        const file = await store.artifact(join(dir, `${fileSafeName(t.name)}-${store.id}.zip`));
        t.diagnostic(`larder: store ${store.id} of the failed test is kept (${store.info.links?.self ?? store.info.path}); artifact saved to ${file}`);
      } else {
        try {
          await store.delete();
        } catch (err) {
          if (err?.status !== 404) throw err; // the test deleted it itself
        }
      }
    } catch (err) {
      // Cleanup never turns a result around; it says what went wrong.
      cleanupFailed(t, store, err);
    } finally {
      work.go();
      await store.close().catch(() => {}); // a local copy's folder goes in any case
    }
  });
  return store;
}

function cleanupFailed(t, store, err) {
  const message = `larder: cleanup of store ${store.id} failed: ${err?.message ?? err}`;
  t.diagnostic(message);
  process.emitWarning(message, { code: 'LARDER_CLEANUP' });
}

// What the helper does in the background (issue 48), so that a test waits for no round trip to the
// server in local mode: the next test's store is made while this one runs, and a passing test's
// store is deleted after it. The README's "What the helper does in the background" says it in full.

/** The TEST part of the label of a store made ready, before a test takes it (then its batch's token). */
const READY_NAME = '(made ready for the next test)';
/** A ready store older than this (or than a quarter of its ttl) is deleted, not handed out. */
export const READY_MAX_AGE_MS = 60_000;
/** With more background work under way than this, a test's end waits for the oldest. */
export const BACKGROUND_MAX = 4;
/** Stores made ready in a batch, deleted at once (DELETE /stores?label=) once each has passed or is out of it. */
export const DELETE_BATCH = 4;
/** How long into a test its ready store is relabelled, when nothing asked for it sooner. */
export const RELABEL_AFTER_MS = 100;
/** How long a background delete or relabelling may take before it counts as failed. */
const BACKGROUND_TIMEOUT_MS = 30_000;

const internals = Larder[Symbol.for('larder-sqlite.internals')];
let ready = null; // {client, key, made, generation, promise: Promise<Store | null>, dropped, batch}
let batch = null; // the batch stores are made ready into now
const unflushed = new Set(); // the batches whose delete is not sent yet
let batches = 0;
const token = `${process.pid.toString(36)}-${randomBytes(3).toString('hex')}`;
const background = new Set(); // Promises of the work under way; each settles, never rejects
let hooked = false;

// The spec a ready store must match (createStore's options but the label), or null where the helper
// makes none: remote mode, forks, a client that is not a Larder.
function readySpec(client, createOptions, label) {
  if (!internals || !(client instanceof Larder) || client.mode === 'remote') return null;
  if (createOptions.from !== undefined || typeof label !== 'string') return null;
  const keys = Object.keys(createOptions).filter((k) => k !== 'label' && createOptions[k] !== undefined).sort();
  return JSON.stringify(keys.map((k) => [k, createOptions[k]]));
}

/** The ready store of `spec` and its batch, or null (none, another spec's, too old, of an older build, not made). */
async function takeReady(client, spec) {
  const entry = ready;
  if (!entry) return null;
  ready = null;
  if (entry.client !== client || entry.key !== spec) {
    dropReady(entry);
    return null;
  }
  const store = await entry.promise;
  if (store && Date.now() - entry.made <= maxAge(store) && entry.generation === internals.buildGeneration()) {
    return { store, batch: entry.batch };
  }
  dropReady(entry);
  return null;
}

function maxAge(store) {
  const ttl = Date.parse(store.info.expires_at) - Date.parse(store.info.created_at);
  return ttl > 0 ? Math.min(READY_MAX_AGE_MS, ttl / 4) : READY_MAX_AGE_MS;
}

/**
 * Makes the next store of `spec` (createStore's `options`, labelled `name` and its batch's token)
 * once `gate` opens, unless one is on its way.
 */
function makeReady(client, spec, options, name, gate) {
  if (ready) {
    if (ready.client === client && ready.key === spec) return;
    dropReady(ready);
  }
  const into = joinBatch(client, name);
  const entry = { client, key: spec, made: Date.now(), generation: internals.buildGeneration(), dropped: false, promise: null, batch: into };
  entry.promise = gate
    .then(() => {
      entry.made = Date.now();
      return internals.createStore(client, { ...options, label: into.label });
    })
    .then(
      (store) => store,
      () => {
        // Not made: the test that wanted it makes its own, and meets the error if there is one.
        decide(into, null);
        return null;
      }
    );
  ready = entry;
  underWay(entry.promise);
  hookSessionEnd();
}

/** The ready store of `entry`, once made, deleted in the background with its batch. */
function dropReady(entry) {
  if (entry.dropped) return;
  entry.dropped = true;
  // Under way until its batch's delete is: settle() waits for both.
  underWay(entry.promise.then((store) => store && decide(entry.batch, store)));
}

// Batches: a passing test's store that still has the label it was made ready with is deleted with the
// others of its batch by one DELETE /stores?label=, once every store of the batch has passed (or
// been dropped) or is out of it (relabelled: deleted on its own; kept under its test's label). The
// label is the file's and a token of this process's, so it names these stores and no others.

/** The batch a store made ready for `client` joins: the one open, or a new one; closed once full. */
function joinBatch(client, name) {
  if (!batch || batch.client !== client || batch.name !== name) {
    if (batch) closeBatch(batch);
    batches += 1;
    // The token is kept whole, however long the rest: the label names this batch and no other.
    const suffix = ` ${token}-${batches}`;
    const label = cutLabel(name, LABEL_MAX_BYTES - Buffer.byteLength(suffix)) + suffix;
    batch = { client, name, label, open: true, members: 0, undecided: 0, doomed: [], poisoned: false };
    unflushed.add(batch);
  }
  const joined = batch;
  joined.members += 1;
  joined.undecided += 1;
  if (joined.members >= DELETE_BATCH) closeBatch(joined);
  return joined;
}

function closeBatch(b) {
  b.open = false;
  if (batch === b) batch = null;
  if (b.undecided === 0) flush(b);
}

/** A store of batch `b` decided: `store` to be deleted with it, or null (made not, out of it). */
function decide(b, store) {
  if (store) b.doomed.push(store);
  b.undecided -= 1;
  if (!b.open && b.undecided === 0) flush(b);
}

/** Deletes the stores of a batch all decided: by its label at once, or one by one when one of them may keep it. */
function flush(b) {
  unflushed.delete(b);
  const stores = b.doomed.splice(0);
  if (stores.length === 0) return;
  const failed = (some) => (err) => {
    const ids = some.map((s) => s.id).join(', ');
    process.emitWarning(`larder: cleanup of store${some.length > 1 ? 's' : ''} ${ids} failed: ${err?.message ?? err}`, { code: 'LARDER_CLEANUP' });
  };
  if (b.poisoned) {
    for (const store of stores) inBackground(() => deleteStore(b.client, store), failed([store]));
    return;
  }
  inBackground(async () => {
    await new Promise((resolveTurn) => setImmediate(resolveTurn)); // as a deferred delete is
    await internals.send(b.client, 'DELETE', '/stores', { query: { label: b.label }, timeoutMs: BACKGROUND_TIMEOUT_MS });
  }, failed(stores));
}

/**
 * The test's label for a ready store, given in the background when it is needed: before the
 * client's next request (its fence), or RELABEL_AFTER_MS into the test; not when the test is over
 * first (a passing test's store is deleted, a failed one's keep carries the label). end(): the
 * relabelling sent (a promise that never rejects), or undefined, and none from then on.
 */
function relabelLater(client, store, label, ttlSeconds) {
  // As long a life as a store made now.
  const ttl = ttlSeconds ?? Math.round((Date.parse(store.info.expires_at) - Date.parse(store.info.created_at)) / 1000);
  const body = Number.isInteger(ttl) && ttl > 0 ? { label, ttl_seconds: ttl } : { label };
  let sent;
  const run = () => {
    if (!sent) {
      clearTimeout(timer);
      internals.unfence(client, run);
      sent = internals.send(client, 'PATCH', store.base, { body, timeoutMs: BACKGROUND_TIMEOUT_MS }).then(
        () => {},
        (err) => {
          if (err?.status === 404) return; // the test deleted it
          process.emitWarning(`larder: relabelling store ${store.id} to ${JSON.stringify(label)} failed: ${err?.message ?? err}`, {
            code: 'LARDER_RELABEL',
          });
        }
      );
      underWay(sent);
    }
    return sent;
  };
  const timer = setTimeout(run, RELABEL_AFTER_MS);
  timer.unref?.();
  internals.fence(client, run);
  return {
    end() {
      clearTimeout(timer);
      internals.unfence(client, run);
      return sent;
    },
  };
}

async function deleteStore(client, store) {
  try {
    await internals.send(client, 'DELETE', store.base, { timeoutMs: BACKGROUND_TIMEOUT_MS });
  } catch (err) {
    if (err?.status !== 404) throw err; // the test deleted it itself
  }
}

/** Runs `work` in the background, `onError` hearing of its failure. */
function inBackground(work, onError) {
  underWay(Promise.resolve().then(work).catch(onError));
  hookSessionEnd();
}

/** Waits while more than BACKGROUND_MAX pieces of work are under way, for the oldest. */
async function roomInBackground() {
  while (background.size > BACKGROUND_MAX) await background.values().next().value;
}

function underWay(promise) {
  background.add(promise);
  promise.then(() => background.delete(promise));
}

/**
 * Deletes the store made ready for a next test, if any, and waits until the helper's background
 * requests have settled (each within its timeout); a failed one has been reported by then. In a
 * `node --test` run the helper does it itself after the file's last test, before the file's own
 * `after` hooks; elsewhere, call it before stopping a server the tests used.
 */
export async function settle() {
  endSession();
  while (background.size > 0) await Promise.all([...background]);
}

/** The ready store dropped, the open batch closed: what is left of them is deleted. */
function endSession() {
  if (ready) {
    dropReady(ready);
    ready = null;
  }
  if (batch) closeBatch(batch);
}

// The session's end. In a test process of `node --test` (NODE_TEST_CONTEXT child-v8), a hook of the
// root test, registered as the helper is imported and so before the test file's own `after` hooks
// (one of which may stop the server): settle(). Not in other processes, where a hook would make
// node:test report. Then, when the process has nothing left to do, the same again (another runner,
// or a file that imported the helper late); the work under way keeps the process alive until it
// settles, so a server `larder up` started for the process outlives it. A process ended by
// process.exit() or a signal does none of it: what is left is said.
if (process.env.NODE_TEST_CONTEXT === 'child-v8') nodeTest.after(settle);

function hookSessionEnd() {
  if (hooked) return;
  hooked = true;
  process.on('beforeExit', endSession);
  process.on('exit', () => {
    let waiting = 0; // passing tests' stores waiting for their batch
    for (const b of unflushed) waiting += b.doomed.length;
    if (background.size === 0 && waiting === 0 && !ready) return;
    const what =
      `the process exited with ${background.size} background request(s) of larder-sqlite/test under way` +
      (waiting ? ` and ${waiting} store(s) of passing tests waiting to be deleted` : '') +
      (ready ? ', and a store made ready for a next test' : '');
    try {
      writeSync(2, `larder: ${what}; what they leave on the server stays until its ttl\n`);
    } catch {}
  });
}

/** A snapshot that failed the migration check; `result` is the check's result. */
export class SnapshotCheckError extends Error {
  constructor(result) {
    super(formatCheckFailure(result));
    this.name = 'SnapshotCheckError';
    // Not enumerable: the message says it all, and reporters print own properties.
    Object.defineProperty(this, 'result', { value: result, enumerable: false, writable: true, configurable: true });
  }
}

/**
 * Registers one node:test test per *.sqlite of `dir`, each running Larder.checkSnapshot on its file.
 * A directory without snapshots is an error, lest a mistyped path pass.
 */
export function testSnapshots(dir, options = {}) {
  const { larder, ...checkOptions } = options;
  if (typeof checkOptions.migrate !== 'function') {
    throw new TypeError("testSnapshots(dir, options): options.migrate must be a function taking the path of the store to migrate (the app's own migrator)");
  }
  for (const key of ['expect', 'snapshot', 'label']) {
    if (checkOptions[key] !== undefined) throw new TypeError(`testSnapshots: '${key}' is per snapshot (each NAME.sqlite has its own NAME.expect.json)`);
  }
  const files = snapshotFiles(dir);
  if (files.length === 0) throw new Error(`testSnapshots: no *.sqlite file in ${resolve(dir)}`);
  const registeredIn = callerFile(); // the test file calling us, for the labels
  for (const file of files) {
    nodeTest.test(file, async (t) => {
      const label = labelOf(t, () => registeredIn);
      const client = larder ?? (await defaultLarder());
      const result = await client.checkSnapshot(join(dir, file), { ...checkOptions, label });
      if (!result.passed) throw new SnapshotCheckError(result);
    });
  }
  return files;
}
