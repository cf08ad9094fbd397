// Larder client for Node 18+: isolated throwaway SQLite stores over HTTP.
// ESM, no dependencies: global fetch, node:fs, node:stream.
// The HTTP contract is API.md of the Larder repository.

import { createWriteStream } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

export const DEFAULT_URL = 'http://127.0.0.1:7464';

// How long the client waits for an answer to an ordinary request, and how
// much longer than the server-side wait timeout it waits for a long poll.
const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;
const WAIT_MARGIN_MS = 15_000;
const SERVER_WAIT_DEFAULT_MS = 30_000;

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
    const res = await this.fetch(method, path, options);
    let text;
    try {
      if (res.status === 204) return null;
      text = await res.text();
    } catch (err) {
      throw new LarderError(`${method} ${path}: reading the answer failed (${err?.message ?? err})`, { code: 'connection_failed', cause: err });
    } finally {
      res.larderDone();
    }
    if (!text) return null;
    try {
      return JSON.parse(text);
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
    // A build may still be running on the server: it waits up to 30 s for it.
    const info = await this.request('POST', '/stores', {
      body,
      timeoutMs: body.build !== undefined ? Math.max(this.timeoutMs, 30_000 + WAIT_MARGIN_MS) : undefined,
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
      timeoutMs: (timeoutMs ?? SERVER_WAIT_DEFAULT_MS) + WAIT_MARGIN_MS,
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
      timeoutMs: Math.max(this.client.timeoutMs, 300_000),
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
