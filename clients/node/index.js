// Larder client for Node 18+: isolated throwaway SQLite stores over HTTP.
// ESM, no dependencies: global fetch, node:fs, node:stream.
// The HTTP contract is API.md of the Larder repository.

import { createWriteStream } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

// The defaults every Larder client shares (clients/defaults.json;
// test/defaults.test.js checks that these agree with it).
export const DEFAULT_URL = 'http://127.0.0.1:7464';

// How long the client waits for an answer to an ordinary request (twice the
// server's default operation limit, 60 s); a request the server holds for a
// wait gets that wait on top. A download (the artifact) may take at least
// DEFAULT_DOWNLOAD_TIMEOUT_MS.
export const DEFAULT_REQUEST_TIMEOUT_MS = 120_000;
export const DEFAULT_DOWNLOAD_TIMEOUT_MS = 300_000;
// How long the server holds a wait that names no timeout_ms.
export const SERVER_WAIT_DEFAULT_MS = 30_000;
// build(): how long it waits, in all, for a build another client runs, and
// how long each long poll of that wait may take (well below the 300 s after
// which fetch gives up on an answer's headers).
export const BUILD_TIMEOUT_DEFAULT_MS = 300_000;
export const BUILD_POLL_MS = 30_000;
// build(): how many times it asks to finish a build while the server answers
// 409 conflict (a connection still writing the file), pausing as Retry-After
// says (this when it says nothing, at most the maximum).
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

// Options of createStore, as the caller names them -> JSON field.
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
    // Only what the caller gave: the server refuses unknown fields and
    // nulls where they are not allowed. An explicit null is sent (a snapshot
    // kept at its own version is {"version": null}).
    if (value !== undefined) body[fields[key]] = value;
  }
  return body;
}

function tableList(tables) {
  if (tables === undefined || tables === null) return undefined;
  return Array.isArray(tables) ? tables.join(',') : String(tables);
}

export class Larder {
  /**
   * @param {{url?: string, token?: string, timeoutMs?: number}} [options]
   *   url defaults to LARDER_URL, then http://127.0.0.1:7464; token to LARDER_TOKEN.
   */
  constructor({ url, token, timeoutMs } = {}) {
    this.url = String(url || process.env.LARDER_URL || DEFAULT_URL).replace(/\/+$/, '');
    this.token = token ?? (process.env.LARDER_TOKEN || null);
    this.timeoutMs = timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  }

  /**
   * Sends one request and answers the fetch Response of a 2xx; anything
   * else becomes a LarderError (LarderTimeout when `timeoutClass` is set and
   * the server answered 408).
   */
  async fetch(method, path, { query, body, timeoutMs, timeoutClass = false } = {}) {
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

    const limit = timeoutMs ?? this.timeoutMs;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), limit);
    let res;
    try {
      res = await fetch(url, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
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
    if (res.ok) return res;

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

  /**
   * POST /stores. Every option is optional; only the given ones are sent.
   * @returns {Promise<Store>}
   */
  async createStore(options = {}) {
    const body = pick(options, CREATE_FIELDS, 'createStore');
    // A build may still be running on the server: it waits for it up to
    // `timeoutMs` (timeout_ms; 30 s when not given), then answers 408.
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
   * Makes sure the app-built template `key` (your fingerprint of the
   * migrations, [A-Za-z0-9._-]{1,128}) is built, and answers `key`, for
   * createStore({build: key}). Of all the clients asking for the same key at
   * once, one is told to build it: its `migrate(path)` (sync or async) opens
   * the empty SQLite file `path` with the application's own driver, runs the
   * migrator and fixtures, commits and closes its connections; the build is
   * then finished (checked and made immutable). The others wait until it is
   * ready; when that build fails, they ask again, and one of them builds.
   *
   * When `migrate` throws, the build is discarded and the error rethrown;
   * when it cannot be finished (409 a connection still holds a write
   * transaction, after BUILD_FINISH_ATTEMPTS tries Retry-After apart; 422 the
   * file fails integrity_check), the build is discarded
   * and that LarderError rejects. Waiting for another client's build longer
   * than `timeoutMs` (default 300000) rejects with LarderTimeout.
   *
   * @param {string} key
   * @param {(path: string) => unknown} migrate
   * @param {{label?: string, timeoutMs?: number}} [options]
   * @returns {Promise<string>} key
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
    // Nobody will finish it: discard it rather than keep the others
    // waiting until its lease runs out. (No answer at all: it may have
    // been finished; the lease settles it.)
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
   * Long poll until `condition` ("artworks>=13", several joined by commas)
   * holds; answers the counts then. Rejects with LarderTimeout (its
   * `counts` the last ones) when it does not hold within `timeoutMs`
   * (server default 30000).
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

  /**
   * GET /stores/{id}/diff: what changed since the store was created:
   * {base, schema: {added, removed, changed}, tables: {t: {inserted, updated,
   * deleted, truncated, rows: [{op, key, old, new}]}}}, changed tables only.
   * `limit` (0..10000, server default 100) caps the rows listed per table,
   * not the counts; `tables` narrows (array or "a,b").
   */
  diff({ limit, tables } = {}) {
    return this.client.request('GET', `${this.base}/diff`, { query: { limit, tables: tableList(tables) } });
  }

  /** GET /stores/{id}/schema */
  schema() {
    return this.client.request('GET', `${this.base}/schema`);
  }

  /**
   * GET /stores/{id}/artifact, streamed into the file `path` (parent
   * directories made); answers the absolute path.
   */
  async artifact(path, { compression } = {}) {
    const target = resolve(path);
    await mkdir(dirname(target), { recursive: true });
    const res = await this.client.fetch('GET', `${this.base}/artifact`, {
      query: { compression },
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

  /** DELETE /stores/{id} */
  async delete() {
    await this.client.request('DELETE', this.base);
  }
}

export default Larder;
