// Larder client for Node 18+: isolated throwaway SQLite stores over HTTP.
// The HTTP contract is docs/api.md of the Larder repository.

import { createWriteStream, existsSync, readdirSync } from 'node:fs';
import { mkdir, readFile, rm } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

// The defaults every Larder client shares: clients/defaults.json, which test/defaults.test.js compares.
export const DEFAULT_URL = 'http://127.0.0.1:7464';

// Longer than the server's own limit on an operation, so its error arrives first; a request the
// server holds for a wait gets that wait on top.
export const DEFAULT_REQUEST_TIMEOUT_MS = 120_000;
export const DEFAULT_DOWNLOAD_TIMEOUT_MS = 300_000;
// How long the server holds a wait that names no timeout_ms.
export const SERVER_WAIT_DEFAULT_MS = 30_000;
// build() waits for another client's build in long polls short enough that fetch never gives
// up on an answer's headers.
export const BUILD_TIMEOUT_DEFAULT_MS = 300_000;
export const BUILD_POLL_MS = 30_000;
// A build's finish answers 409 while a connection still writes the file: ask again, as
// Retry-After says, within these bounds.
export const BUILD_FINISH_ATTEMPTS = 5;
export const RETRY_AFTER_DEFAULT_MS = 1_000;
export const RETRY_AFTER_MAX_MS = 10_000;

/** An error answer of the server (or a failure to reach it: status 0). */
export class LarderError extends Error {
  constructor(message, { status = 0, code = 'client_error', details = {}, requestId = null, retryAfter = null, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'LarderError';
    this.status = status;
    this.code = code;
    this.details = details ?? {};
    this.requestId = requestId;
    this.retryAfter = retryAfter;
  }
}

/** A wait whose condition did not hold in time; `counts` are the last counts seen. */
export class LarderTimeout extends LarderError {
  constructor(message, options = {}) {
    super(message, options);
    this.name = 'LarderTimeout';
  }

  get counts() {
    return this.details?.counts ?? {};
  }
}

// createStore's options -> the JSON fields they are sent as.
const CREATE_FIELDS = {
  template: 'template',
  fixtures: 'fixtures',
  version: 'version',
  snapshot: 'snapshot',
  label: 'label',
  build: 'build',
  from: 'from',
  ttlSeconds: 'ttl_seconds',
  timeoutMs: 'timeout_ms',
};

function pick(options, fields, what) {
  const body = {};
  for (const [key, value] of Object.entries(options ?? {})) {
    if (!Object.hasOwn(fields, key)) {
      throw new TypeError(`${what}: unknown option '${key}'; known: ${Object.keys(fields).join(', ')}`);
    }
    // The server refuses nulls where it takes none, so send only what was given; an explicit
    // null is given ({"version": null} keeps a snapshot at its own version).
    if (value !== undefined) body[fields[key]] = value;
  }
  return body;
}

function tableList(tables) {
  if (tables === undefined || tables === null) return undefined;
  return Array.isArray(tables) ? tables.join(',') : String(tables);
}

export class Larder {
  /** `url` defaults to LARDER_URL, then DEFAULT_URL; `token` to LARDER_TOKEN. */
  constructor({ url, token, timeoutMs } = {}) {
    this.url = String(url || process.env.LARDER_URL || DEFAULT_URL).replace(/\/+$/, '');
    this.token = token ?? (process.env.LARDER_TOKEN || null);
    this.timeoutMs = timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  }

  /**
   * One request, answering the Response of a 2xx; anything else rejects with a LarderError
   * (a LarderTimeout for a 408 when `timeoutClass` is set). The caller must call res.larderDone().
   */
  async fetch(method, path, { query, body, raw, contentType, allow, timeoutMs, timeoutClass = false } = {}) {
    let url = this.url + path;
    if (query) {
      const params = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null) params.set(k, String(v));
      const qs = params.toString();
      if (qs) url += '?' + qs;
    }
    const headers = { Accept: 'application/json' };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    // A raw body (an upload's bytes) goes as it is, with its own type.
    if (raw !== undefined) headers['Content-Type'] = contentType ?? 'application/octet-stream';

    const limit = timeoutMs ?? this.timeoutMs;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), limit);
    let res;
    try {
      res = await fetch(url, {
        method,
        headers,
        body: raw !== undefined ? raw : body === undefined ? undefined : JSON.stringify(body),
        signal: controller.signal,
      });
    } catch (err) {
      clearTimeout(timer);
      if (controller.signal.aborted) {
        throw new LarderError(`${method} ${url}: no answer within ${limit} ms`, { code: 'client_timeout', cause: err });
      }
      const why = err?.cause?.message || err?.message || String(err);
      throw new LarderError(`${method} ${url}: cannot reach the Larder server (${why}); is it running, and is LARDER_URL right?`, {
        code: 'connection_failed',
        cause: err,
      });
    }
    // The timer stays armed while the caller reads the body; clear it then.
    res.larderDone = () => clearTimeout(timer);
    // `allow`: statuses whose body is an answer, not an error (a check's 422).
    if (res.ok || allow?.includes(res.status)) return res;

    let text = '';
    try {
      text = await res.text();
    } finally {
      clearTimeout(timer);
    }
    let code = 'http_error';
    let message = `${method} ${path}: HTTP ${res.status}`;
    let details = {};
    try {
      const parsed = JSON.parse(text);
      if (parsed && typeof parsed.error === 'object' && parsed.error) {
        code = parsed.error.code ?? code;
        message = parsed.error.message ?? message;
        details = parsed.error.details ?? {};
      }
    } catch {
      if (text) message += `: ${text.slice(0, 500)}`;
    }
    const retry = res.headers.get('retry-after');
    const ErrorClass = timeoutClass && res.status === 408 ? LarderTimeout : LarderError;
    throw new ErrorClass(message, {
      status: res.status,
      code,
      details,
      requestId: res.headers.get('x-request-id'),
      retryAfter: retry === null || retry === '' || Number.isNaN(Number(retry)) ? null : Number(retry),
    });
  }

  /** A request whose answer is JSON (or nothing, for a 204). */
  async request(method, path, options) {
    return (await this.exchange(method, path, options)).body;
  }

  /** As `request`, answering {status, body}: for answers whose 2xx status says something. */
  async exchange(method, path, options) {
    const res = await this.fetch(method, path, options);
    const answer = (body) => ({ status: res.status, body });
    let text;
    try {
      if (res.status === 204) return answer(null);
      text = await res.text();
    } catch (err) {
      throw new LarderError(`${method} ${path}: reading the answer failed (${err?.message ?? err})`, { code: 'connection_failed', cause: err });
    } finally {
      res.larderDone();
    }
    if (!text) return answer(null);
    try {
      return answer(JSON.parse(text));
    } catch (err) {
      throw new LarderError(`${method} ${path}: the answer is not JSON: ${text.slice(0, 200)}`, { status: res.status, code: 'bad_answer', cause: err });
    }
  }

  /** GET /health */
  health() {
    return this.request('GET', '/health');
  }

  /** GET /templates */
  async templates() {
    return (await this.request('GET', '/templates')).templates;
  }

  /** POST /stores, sending only the options given. */
  async createStore(options = {}) {
    const body = pick(options, CREATE_FIELDS, 'createStore');
    // With a build still running the server holds the request up to timeout_ms, then answers 408.
    const waits = body.build !== undefined;
    const info = await this.request('POST', '/stores', {
      body,
      timeoutMs: waits ? this.timeoutMs + (body.timeout_ms ?? SERVER_WAIT_DEFAULT_MS) : undefined,
      timeoutClass: waits,
    });
    return new Store(this, info);
  }

  /** GET /stores/{id}: a Store object for a live store. */
  async getStore(id) {
    return new Store(this, await this.request('GET', `/stores/${encodeURIComponent(id)}`));
  }

  /** GET /stores (newest first); filters: label, template, limit, cursor. */
  async listStores({ label, template, limit, cursor } = {}) {
    return (await this.request('GET', '/stores', { query: { label, template, limit, cursor } })).stores;
  }

  /**
   * Makes sure the app-built template `key` is built, by this client's `migrate(path)` or by
   * another client's, and answers `key` for createStore({build: key}).
   */
  async build(key, migrate, { label, timeoutMs = BUILD_TIMEOUT_DEFAULT_MS } = {}) {
    if (typeof migrate !== 'function') {
      throw new TypeError('build(key, migrate): migrate must be a function taking the path of the database to build');
    }
    const deadline = Date.now() + timeoutMs;
    const body = { key };
    if (label !== undefined) body.label = label;
    for (;;) {
      const { status, body: info } = await this.exchange('POST', '/builds', { body });
      if (status === 201) {
        await runBuild(this, key, info.path, migrate);
        return key;
      }
      if (status !== 202) return key; // 200: built already
      // 202: another client builds it. Ready: done; discarded: ask again.
      if (await awaitBuild(this, key, deadline, timeoutMs)) return key;
    }
  }

  /** GET /builds: every build, building or ready. */
  async builds() {
    return (await this.request('GET', '/builds')).builds;
  }

  /** GET /builds/{key}; rejects with 404 unknown_build when there is none. */
  buildInfo(key) {
    return this.request('GET', buildPath(key));
  }

  /** DELETE /builds/{key}: the next build(key) builds it again. */
  async discardBuild(key) {
    await this.request('DELETE', buildPath(key));
  }

  /** POST /stores with a SQLite file (a path, or its bytes) as the body: a store of the file as it is. */
  async upload(file, options = {}) {
    const { label, ttlSeconds } = pick(options, { label: 'label', ttlSeconds: 'ttl_seconds' }, 'upload');
    const bytes = typeof file === 'string' || file instanceof URL ? await readFile(file) : file;
    if (!(bytes instanceof Uint8Array)) throw new TypeError('upload(file): file must be a path or the bytes of a SQLite database');
    const info = await this.request('POST', '/stores', {
      query: { label, ttl_seconds: ttlSeconds },
      raw: bytes,
      contentType: 'application/vnd.sqlite3',
    });
    return new Store(this, info);
  }

  /**
   * POST /stores/{id}/check: resolves with the result whether the migrated upload passed (200) or
   * failed (422), and rejects only when nothing could be judged.
   */
  async check(store, against, options = {}) {
    const id = typeof store === 'string' ? store : store?.id;
    if (typeof id !== 'string' || !id) throw new TypeError('check(store, against): store must be a Store or a store id');
    const body = { against: referenceOf(against, 'check') };
    Object.assign(body, pick(options, { snapshot: 'snapshot', expect: 'expect', data: 'data' }, 'check'));
    const path = `/stores/${encodeURIComponent(id)}/check`;
    const { status, body: result } = await this.exchange('POST', path, { body, allow: [422] });
    if (result?.error && typeof result.error === 'object') {
      // A 422 that is an error, not a result.
      const { code = 'http_error', message = `POST ${path}: HTTP ${status}`, details = {} } = result.error;
      throw new LarderError(message, { status, code, details });
    }
    return result;
  }

  /**
   * An old database as the app will meet it: uploaded, migrated by `options.migrate`, checked. A store
   * that failed, or whose migration threw, is kept for a look; the others are deleted.
   */
  async checkSnapshot(path, options = {}) {
    const { migrate, build, template, version, store, expect, data, label, snapshot } = checkOptions(options, 'checkSnapshot');
    const name = snapshot ?? basename(path);
    const against = referenceOf({ build, template, version, store }, 'checkSnapshot');
    const expected = expect === undefined ? await readExpect(path) : expect;
    const uploaded = await this.upload(path, { label: label ?? name });
    try {
      await migrate(uploaded.path);
    } catch (err) {
      await uploaded.keep().catch(() => {});
      throw new Error(`${name}: the migrator failed on store ${uploaded.id} (kept): ${err?.message ?? err}`, { cause: err });
    }
    let result;
    try {
      result = await this.check(uploaded, against, { snapshot: name, expect: expected ?? undefined, data });
    } catch (err) {
      await uploaded.delete().catch(() => {});
      throw err;
    }
    if (result.passed) {
      await uploaded.delete();
    } else {
      await uploaded.keep();
    }
    return { ...result, store: uploaded.id, kept: !result.passed };
  }

  /** checkSnapshot() for every *.sqlite of `dir` in file name order, each with its own NAME.expect.json. */
  async checkSnapshots(dir, options = {}) {
    refuseSnapshotOnly(options, 'checkSnapshots');
    const results = [];
    for (const file of snapshotFiles(dir)) {
      results.push(await this.checkSnapshot(join(dir, file), options));
    }
    return results;
  }
}

/** The *.sqlite file names of `dir`, sorted (code unit order), as checkSnapshots takes them. */
export function snapshotFiles(dir) {
  return readdirSync(dir).filter((f) => f.endsWith('.sqlite')).sort();
}

const CHECK_SNAPSHOT_OPTIONS = ['migrate', 'build', 'template', 'version', 'store', 'expect', 'data', 'label', 'snapshot'];

/** checkSnapshot's options, checked: known keys, a migrate function. */
function checkOptions(options, what) {
  for (const key of Object.keys(options ?? {})) {
    if (!CHECK_SNAPSHOT_OPTIONS.includes(key)) {
      throw new TypeError(`${what}: unknown option '${key}'; known: ${CHECK_SNAPSHOT_OPTIONS.join(', ')}`);
    }
  }
  if (typeof options?.migrate !== 'function') {
    throw new TypeError(`${what}: options.migrate must be a function taking the path of the store to migrate (the app's own migrator)`);
  }
  return options;
}

/** The options a whole directory cannot take: each snapshot has its own. */
function refuseSnapshotOnly(options, what) {
  for (const key of ['expect', 'snapshot', 'label']) {
    if (options?.[key] !== undefined) {
      throw new TypeError(`${what}: '${key}' is per snapshot (each NAME.sqlite has its own NAME.expect.json); use checkSnapshot for one file`);
    }
  }
  checkOptions(options, what);
}

/** A check's `against`: exactly one of build, template (+ version), store. */
function referenceOf(against, what) {
  const { build, template, version, store } = against ?? {};
  const given = [build, template, store].filter((v) => v !== undefined && v !== null);
  if (given.length !== 1 || (version !== undefined && version !== null && template == null)) {
    throw new TypeError(`${what}: say what the migrated store must match, exactly one of {build: KEY}, {template: NAME, version: V} or {store: ID}`);
  }
  for (const key of Object.keys(against)) {
    if (!['build', 'template', 'version', 'store'].includes(key)) throw new TypeError(`${what}: unknown reference '${key}'`);
  }
  if (build != null) return { build };
  if (store != null) return { store: typeof store === 'string' ? store : store.id };
  return version == null ? { template } : { template, version };
}

/** NAME.expect.json beside NAME.sqlite, parsed; null when there is none. */
async function readExpect(path) {
  const file = join(dirname(path), basename(path).replace(/\.sqlite$/, '') + '.expect.json');
  if (!existsSync(file)) return null;
  const text = await readFile(file, 'utf8');
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new Error(`${file} is not JSON: ${err.message}`, { cause: err });
  }
}

/** A failed check as a test failure's text: the snapshot, its versions, the kept store, then each failure. */
export function formatCheckFailure(result) {
  const name = result.snapshot ?? 'snapshot';
  const versions = `${result.from_version ?? '?'} → ${result.to_version ?? '?'}`;
  const store = result.store ? `; store ${result.store} is ${result.kept ? 'kept' : 'gone'}` : '';
  const failures = result.failures?.length ? result.failures : ['(the check failed without saying why)'];
  return `${name} (${versions}) failed the migration check${store}:\n` + failures.map((f) => `  ${f}`).join('\n');
}

function buildPath(key) {
  return `/builds/${encodeURIComponent(key)}`;
}

/** build(), as the builder: migrate, then finish; discard the build when either fails. */
async function runBuild(client, key, path, migrate) {
  const base = buildPath(key);
  try {
    await migrate(path);
  } catch (err) {
    await client.request('DELETE', base).catch(() => {});
    throw err;
  }
  try {
    await finishBuild(client, `${base}/finish`);
  } catch (err) {
    // Nobody will finish it: discard it rather than keep the others waiting out its lease. With
    // no answer at all it may have been finished, and the lease settles it.
    if (err?.status >= 400 && err.code !== 'unknown_build') await client.request('DELETE', base).catch(() => {});
    throw err;
  }
}

/** POST /builds/{key}/finish, asked again while it answers 409 conflict. */
async function finishBuild(client, path) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await client.request('POST', path);
    } catch (err) {
      if (err?.status !== 409 || attempt >= BUILD_FINISH_ATTEMPTS) throw err;
      const pause = err.retryAfter === null ? RETRY_AFTER_DEFAULT_MS : err.retryAfter * 1000;
      await new Promise((resolveTimer) => setTimeout(resolveTimer, Math.min(Math.max(pause, 0), RETRY_AFTER_MAX_MS)));
    }
  }
}

/**
 * build(), as a waiter: long polls until the build is ready (true) or
 * discarded (false, its builder failed); LarderTimeout past `deadline`.
 */
async function awaitBuild(client, key, deadline, timeoutMs) {
  let last;
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) {
      throw new LarderTimeout(`build ${key}: another client is still building it after ${timeoutMs} ms`, {
        status: 408,
        code: 'timeout',
        details: { key, ...(last?.details ?? {}) },
        cause: last,
      });
    }
    const wait = Math.min(left, BUILD_POLL_MS);
    try {
      await client.request('GET', buildPath(key), {
        query: { wait: 'ready', timeout_ms: wait },
        timeoutMs: wait + client.timeoutMs,
        timeoutClass: true,
      });
      return true;
    } catch (err) {
      if (err?.status === 404 && err.code === 'unknown_build') return false;
      if (!(err instanceof LarderTimeout)) throw err;
      last = err;
    }
  }
}

export class Store {
  constructor(client, info) {
    this.client = client;
    this.info = info;
  }

  get id() {
    return this.info.id;
  }

  get path() {
    return this.info.path;
  }

  get base() {
    return `/stores/${encodeURIComponent(this.id)}`;
  }

  /** GET /stores/{id}; updates and answers `info`. */
  async refresh() {
    this.info = await this.client.request('GET', this.base);
    return this.info;
  }

  /** GET /stores/{id}/counts: {table: rows}; `tables` narrows (array or "a,b"). */
  async counts({ tables } = {}) {
    const answer = await this.client.request('GET', `${this.base}/counts`, { query: { tables: tableList(tables) } });
    return answer.counts;
  }

  /**
   * Long polls until `condition` ("artworks>=13", several joined by commas) holds, answering the
   * counts; a LarderTimeout, with the last counts, when it does not hold in time.
   */
  async wait(condition, { timeoutMs, tables } = {}) {
    const answer = await this.client.request('GET', `${this.base}/counts`, {
      query: { wait: condition, timeout_ms: timeoutMs, tables: tableList(tables) },
      timeoutMs: (timeoutMs ?? SERVER_WAIT_DEFAULT_MS) + this.client.timeoutMs,
      timeoutClass: true,
    });
    return answer.counts;
  }

  /** POST /stores/{id}/query: one statement; answers {columns, rows, changes}. */
  query(sql, params) {
    const body = { sql };
    if (params !== undefined) body.params = params;
    return this.client.request('POST', `${this.base}/query`, { body });
  }

  /** POST /stores/{id}/fixtures: fixtures by name, inline rows or SQL; answers {loaded, counts}. */
  load(options = {}) {
    const body = pick(options, { fixtures: 'fixtures', rows: 'rows', sql: 'sql' }, 'load');
    return this.client.request('POST', `${this.base}/fixtures`, { body });
  }

  /** POST /stores/{id}/migrate; answers {from, to, applied}. */
  migrate({ to = 'latest' } = {}) {
    return this.client.request('POST', `${this.base}/migrate`, { body: { to } });
  }

  /** POST /stores/{id}/reset: back to the contents it was created with, in place. */
  async reset() {
    this.info = await this.client.request('POST', `${this.base}/reset`);
    return this.info;
  }

  /** GET /stores/{id}/diff: what changed since the store was created; `limit` caps the rows listed, not the counts. */
  diff({ limit, tables } = {}) {
    return this.client.request('GET', `${this.base}/diff`, { query: { limit, tables: tableList(tables) } });
  }

  /** GET /stores/{id}/schema */
  schema() {
    return this.client.request('GET', `${this.base}/schema`);
  }

  /** GET /stores/{id}/artifact, streamed into the file `path`; answers its absolute path.
   *  With its creation state (base.sqlite) unless `base: false`: `larder open` shows what the test changed. */
  async artifact(path, { compression, base = true } = {}) {
    const target = resolve(path);
    await mkdir(dirname(target), { recursive: true });
    const res = await this.client.fetch('GET', `${this.base}/artifact`, {
      query: { compression, base: base ? 'true' : undefined },
      timeoutMs: Math.max(this.client.timeoutMs, DEFAULT_DOWNLOAD_TIMEOUT_MS),
    });
    try {
      await pipeline(Readable.fromWeb(res.body), createWriteStream(target));
    } catch (err) {
      await rm(target, { force: true });
      throw new LarderError(`saving the artifact of ${this.id} to ${target} failed: ${err.message}`, { code: 'artifact_failed', cause: err });
    } finally {
      res.larderDone();
    }
    return target;
  }

  /** PATCH /stores/{id} {"keep": true}: the store outlives its ttl until deleted. */
  async keep() {
    this.info = await this.client.request('PATCH', this.base, { body: { keep: true } });
    return this.info;
  }

  /** POST /stores/{id}/check: this store (an upload the app migrated) judged; see Larder.check. */
  check(against, options) {
    return this.client.check(this, against, options);
  }

  /** DELETE /stores/{id} */
  async delete() {
    await this.client.request('DELETE', this.base);
  }
}

export default Larder;
