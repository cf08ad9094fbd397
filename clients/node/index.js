// Larder client for Node 18+: isolated throwaway SQLite stores over HTTP.
// The HTTP contract is docs/api.md of the Larder repository.

import { createHash } from 'node:crypto';
import { createWriteStream, existsSync, readdirSync, rmSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rename, rm, stat } from 'node:fs/promises';
import { connect as netConnect } from 'node:net';
import { tmpdir } from 'node:os';
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

// Remote mode (issue 47): the client works on a local copy of each store and hands it back.
const MODES = ['local', 'remote'];

/** Whether `url`'s host is a loopback address: localhost, 127.0.0.0/8 or ::1. */
function isLoopbackUrl(url) {
  let host;
  try {
    host = new URL(url).hostname.toLowerCase();
  } catch {
    return false;
  }
  // The URL parser has made 127.1 127.0.0.1 and [0:0:0:0:0:0:0:1] [::1] already.
  return host === 'localhost' || host === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/**
 * The mode a client works in: `mode` when given ('local' or 'remote'), else LARDER_MODE, else
 * remote when `url`'s host is not a loopback address; `url` null (a server the helper starts) is local.
 * @param {{ mode?: 'local' | 'remote' | null, url?: string | null }} [options]
 * @returns {'local' | 'remote'}
 */
export function resolveMode({ mode, url } = {}) {
  if (mode !== undefined && mode !== null) {
    if (!MODES.includes(mode)) throw new TypeError(`Larder: mode must be 'remote' or 'local', not ${JSON.stringify(mode)}`);
    return mode;
  }
  const env = process.env.LARDER_MODE;
  if (env) {
    if (!MODES.includes(env)) {
      throw new LarderError(`Larder: LARDER_MODE must be 'remote' or 'local' (or unset), not ${JSON.stringify(env)}`, { code: 'bad_mode' });
    }
    return env;
  }
  if (url === null) return 'local';
  return isLoopbackUrl(url) ? 'local' : 'remote';
}

export class Larder {
  /**
   * `url` defaults to LARDER_URL, then DEFAULT_URL; `token` to LARDER_TOKEN; `mode` to LARDER_MODE,
   * then remote for a server that is not on a loopback address (see resolveMode).
   */
  constructor({ url, token, timeoutMs, mode } = {}) {
    this.url = String(url || process.env.LARDER_URL || DEFAULT_URL).replace(/\/+$/, '');
    this.token = token ?? (process.env.LARDER_TOKEN || null);
    this.timeoutMs = timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.mode = resolveMode({ mode, url: this.url });
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
    throw answerError(method, path, res.status, text, (name) => res.headers.get(name), timeoutClass);
  }

  /** A request whose answer is JSON (or nothing, for a 204). */
  async request(method, path, options) {
    return (await this.exchange(method, path, options)).body;
  }

  /** As `request`, answering {status, body}: for answers whose 2xx status says something. */
  async exchange(method, path, options) {
    // Stores the test helper handed out with a label still to be given: given first, so that what this
    // client asks sees their labels.
    const due = fences.get(this);
    if (due?.size) await Promise.all([...due].map((relabel) => relabel()));
    return send(this, method, path, options);
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
    return madeStore(this, info);
  }

  /** GET /stores/{id}: a Store object for a live store (in remote mode, with a local copy of it). */
  async getStore(id) {
    const store = new Store(this, await this.request('GET', `/stores/${encodeURIComponent(id)}`));
    if (this.mode === 'remote') await checkOut(store);
    return store;
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
      // Built anew here or elsewhere: a store the test helper made ready of the last one is not handed out.
      if (status !== 200) buildGeneration += 1;
      if (status === 201) {
        if (this.mode === 'remote') {
          // Its migrator would need the server's file; give the build back for a local client.
          await this.request('DELETE', buildPath(key)).catch(() => {});
          throw new LarderError(
            `build ${key}: in remote mode this client cannot build (the migrator would run on the server's file ${info.path}); ` +
              'build it from a client on the server\'s machine, or check against a template or an uploaded store',
            { code: 'remote_mode', details: { key } }
          );
        }
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
    buildGeneration += 1;
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
    return madeStore(this, info);
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
    if (typeof store === 'object') await checkInChanged(store); // a migrator that ran on a local copy
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
    // In remote mode the upload comes with a local copy: the migrator runs on it, and it is
    // checked in before the check.
    const uploaded = await this.upload(path, { label: label ?? name });
    try {
      try {
        await migrate(uploaded.path);
      } catch (err) {
        await uploaded.checkIn().catch(() => {});
        await uploaded.keep().catch(() => {});
        throw new Error(`${name}: the migrator failed on store ${uploaded.id} (kept): ${err?.message ?? err}`, { cause: err });
      }
      let result;
      try {
        await uploaded.checkIn();
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
    } finally {
      await uploaded.close();
    }
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

/** The LarderError of a non-2xx answer: the server's {"error": ...} when it sent one. */
function answerError(method, path, status, text, header, timeoutClass) {
  let code = 'http_error';
  let message = `${method} ${path}: HTTP ${status}`;
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
  const retry = header('retry-after');
  const ErrorClass = timeoutClass && status === 408 ? LarderTimeout : LarderError;
  return new ErrorClass(message, {
    status,
    code,
    details,
    requestId: header('x-request-id'),
    retryAfter: retry === null || retry === undefined || retry === '' || Number.isNaN(Number(retry)) ? null : Number(retry),
  });
}

/** {status, body} of an answer's text (null for none), or a bad_answer LarderError. */
function jsonAnswer(method, path, status, text) {
  if (!text) return { status, body: null };
  try {
    return { status, body: JSON.parse(text) };
  } catch (err) {
    throw new LarderError(`${method} ${path}: the answer is not JSON: ${text.slice(0, 200)}`, { status, code: 'bad_answer', cause: err });
  }
}

/** One request whose answer is JSON: over the lean path when it can take it, else through fetch. */
async function send(client, method, path, options = {}) {
  const pool = options.raw === undefined ? leanPool(client) : null;
  if (pool) {
    const answer = await leanExchange(client, pool, method, path, options);
    if (answer) return answer;
    // A redirect: fetch follows it.
  }
  const res = await client.fetch(method, path, options);
  let text;
  try {
    if (res.status === 204) return { status: 204, body: null };
    text = await res.text();
  } catch (err) {
    throw new LarderError(`${method} ${path}: reading the answer failed (${err?.message ?? err})`, { code: 'connection_failed', cause: err });
  } finally {
    res.larderDone();
  }
  return jsonAnswer(method, path, res.status, text);
}

// The lean path (issue 48): JSON requests to an http: server go over kept-alive connections of this
// module's own, HTTP/1.1 on node:net. A request costs about a quarter of the CPU fetch (undici) takes
// and half of node:http's, which a test helper making and deleting a store per test feels. Streams
// (artifacts, downloads), raw uploads and https: stay with fetch.

// An idle connection is reused within this long (a server closes idle ones: 60 s by default), and
// this many are kept per client.
const LEAN_IDLE_MS = 2_000;
const LEAN_IDLE_MAX = 8;
const LEAN_HEAD_MAX = 64 * 1024;
const HEADER_SAFE = /^[^\r\n\0]*$/;
const pools = new WeakMap(); // Larder -> {url, pool: LeanPool | null}

/** The lean pool of `client`'s URL, or null when the URL is not a plain http: one. */
function leanPool(client) {
  const known = pools.get(client);
  if (known && known.url === client.url) return known.pool;
  known?.pool?.close();
  let pool = null;
  try {
    const u = new URL(client.url);
    if (u.protocol === 'http:' && !u.username && !u.password && !u.search && !u.hash) pool = new LeanPool(u);
  } catch {}
  pools.set(client, { url: client.url, pool });
  return pool;
}

class LeanPool {
  constructor(u) {
    this.host = u.hostname.replace(/^\[(.*)\]$/, '$1');
    this.port = Number(u.port || 80);
    this.hostHeader = u.host;
    this.prefix = u.pathname === '/' ? '' : u.pathname.replace(/\/+$/, '');
    this.idle = [];
  }

  /** An idle connection young enough, else a new one. */
  acquire(fresh) {
    while (!fresh && this.idle.length) {
      const conn = this.idle.pop();
      if (!conn.closed && Date.now() - conn.idleSince < LEAN_IDLE_MS) return conn;
      conn.destroy();
    }
    return new LeanConnection(this);
  }

  release(conn) {
    conn.idleSince = Date.now();
    conn.socket.unref(); // an idle connection keeps no process alive, nor a server from stopping for long
    conn.socket.setTimeout(LEAN_IDLE_MS);
    if (this.idle.length < LEAN_IDLE_MAX) this.idle.push(conn);
    else conn.destroy();
  }

  forget(conn) {
    const i = this.idle.indexOf(conn);
    if (i >= 0) this.idle.splice(i, 1);
  }

  close() {
    for (const conn of this.idle.splice(0)) conn.destroy();
  }

  /** {status, header(name), text}; rejects with the transport's error (err.timedOut for a timeout). */
  async exchange(head, body, limitMs) {
    for (let attempt = 1; ; attempt += 1) {
      const conn = this.acquire(attempt > 1);
      try {
        return await conn.exchange(head, body, limitMs);
      } catch (err) {
        // A kept-alive connection the server had closed before reading the request: once more on a
        // new one (nothing of the answer came, so nothing was done).
        if (attempt > 1 || !err.stale) throw err;
      }
    }
  }
}

class LeanConnection {
  constructor(pool) {
    this.pool = pool;
    this.used = 0; // answers read on it
    this.closed = false;
    this.idleSince = 0;
    this.pending = null;
    this.buffer = null;
    this.socket = netConnect({ host: pool.host, port: pool.port });
    this.socket.setNoDelay(true);
    this.socket.on('data', (chunk) => this.onData(chunk));
    this.socket.on('error', (err) => this.onEnd(err));
    this.socket.on('close', () => this.onEnd(null));
    this.socket.on('timeout', () => this.pending || this.destroy()); // idle for LEAN_IDLE_MS
  }

  destroy() {
    this.closed = true;
    this.socket.destroy();
  }

  exchange(head, body, limitMs) {
    return new Promise((resolvePromise, reject) => {
      const pending = { resolve: resolvePromise, reject, got: false, head: null, parts: null, size: 0, timer: null };
      this.socket.setTimeout(0);
      pending.timer = setTimeout(() => {
        const err = new Error(`no answer within ${limitMs} ms`);
        err.timedOut = true;
        this.fail(err);
        this.destroy();
      }, limitMs);
      this.pending = pending;
      this.socket.ref();
      this.socket.write(body ? head + body : head);
    });
  }

  onData(chunk) {
    const pending = this.pending;
    if (!pending) {
      this.destroy(); // bytes nobody asked for
      return;
    }
    pending.got = true;
    if (pending.head && !pending.head.chunked) {
      // A body of a known length, or one that ends with the connection: gathered, joined once.
      pending.parts.push(chunk);
      pending.size += chunk.length;
      this.complete(pending);
      return;
    }
    this.buffer = this.buffer ? Buffer.concat([this.buffer, chunk]) : chunk;
    try {
      this.parse(pending);
    } catch (err) {
      this.fail(err);
      this.destroy();
    }
  }

  /** Finishes `pending` once its body of a known length has come. */
  complete(pending) {
    const { length } = pending.head;
    if (length < 0 || pending.size < length) return;
    const all = pending.parts.length === 1 ? pending.parts[0] : Buffer.concat(pending.parts, pending.size);
    this.finish(pending, all.subarray(0, length), pending.size > length);
  }

  parse(pending) {
    const buffer = this.buffer;
    if (!pending.head) {
      const end = buffer.indexOf('\r\n\r\n');
      if (end < 0) {
        if (buffer.length > LEAN_HEAD_MAX) throw new Error('the answer\'s header is too long');
        return;
      }
      const lines = buffer.toString('latin1', 0, end).split('\r\n');
      const m = /^HTTP\/1\.([01]) (\d{3})/.exec(lines[0]);
      if (!m) throw new Error(`not an HTTP answer: ${JSON.stringify(lines[0].slice(0, 80))}`);
      const status = Number(m[2]);
      const headers = new Map();
      for (let i = 1; i < lines.length; i += 1) {
        const colon = lines[i].indexOf(':');
        if (colon <= 0) continue;
        const name = lines[i].slice(0, colon).trim().toLowerCase();
        const value = lines[i].slice(colon + 1).trim();
        headers.set(name, headers.has(name) ? `${headers.get(name)}, ${value}` : value);
      }
      this.buffer = buffer.subarray(end + 4);
      if (status >= 100 && status < 200) return this.buffer.length ? this.parse(pending) : undefined; // 100 Continue: the answer follows
      const connection = (headers.get('connection') ?? '').toLowerCase();
      const length = headers.get('content-length');
      pending.head = {
        status,
        headers,
        keepAlive: m[1] === '1' ? !connection.includes('close') : connection.includes('keep-alive'),
        chunked: /chunked/i.test(headers.get('transfer-encoding') ?? ''),
        length: status === 204 || status === 304 ? 0 : length === undefined ? -1 : Number(length),
      };
      if (!pending.head.chunked && !(pending.head.length >= -1)) throw new Error(`a bad Content-Length: ${length}`);
    }
    const head = pending.head;
    if (head.chunked) {
      const body = dechunk(this.buffer);
      if (body) this.finish(pending, body.data, body.end < this.buffer.length);
      return;
    }
    // From here on onData gathers the body; an answer of no length ends with the connection.
    pending.parts = [this.buffer];
    pending.size = this.buffer.length;
    this.buffer = null;
    this.complete(pending);
  }

  finish(pending, body, extra) {
    clearTimeout(pending.timer);
    this.pending = null;
    this.buffer = null;
    this.used += 1;
    const head = pending.head;
    if (head.keepAlive && !extra && !this.closed) this.pool.release(this);
    else this.destroy();
    pending.resolve({ status: head.status, header: (name) => head.headers.get(name) ?? null, text: body.toString('utf8') });
  }

  /** Rejects the pending exchange, if any, with `err`. */
  fail(err) {
    const pending = this.pending;
    if (!pending) return;
    clearTimeout(pending.timer);
    this.pending = null;
    this.buffer = null;
    if (!pending.got && this.used > 0) err.stale = true;
    pending.reject(err);
  }

  onEnd(err) {
    const wasClosed = this.closed;
    this.closed = true;
    this.pool.forget(this);
    const pending = this.pending;
    if (!pending) return;
    // An answer of no length: the connection's end ends it.
    if (!err && pending.head && !pending.head.chunked && pending.head.length === -1 && !wasClosed) {
      this.finish(pending, Buffer.concat(pending.parts ?? [], pending.size ?? 0), false);
      return;
    }
    this.fail(err ?? new Error(pending.got ? 'the connection closed before the answer ended' : 'the connection closed without an answer'));
  }
}

/** A chunked body read from `buffer`: {data, end} once its last chunk (and trailers) came, else null. */
function dechunk(buffer) {
  const parts = [];
  let pos = 0;
  for (;;) {
    const lineEnd = buffer.indexOf('\r\n', pos);
    if (lineEnd < 0) return null;
    const size = parseInt(buffer.toString('latin1', pos, lineEnd), 16);
    if (Number.isNaN(size) || size < 0) throw new Error('a bad chunk size in the answer');
    if (size === 0) {
      for (let p = lineEnd + 2; ; ) {
        const e = buffer.indexOf('\r\n', p);
        if (e < 0) return null;
        if (e === p) return { data: Buffer.concat(parts), end: e + 2 };
        p = e + 2;
      }
    }
    const start = lineEnd + 2;
    if (buffer.length < start + size + 2) return null;
    parts.push(buffer.subarray(start, start + size));
    pos = start + size + 2;
  }
}

/** `send` over the lean path: {status, body}, a LarderError, or null for a redirect (fetch follows it). */
async function leanExchange(client, pool, method, path, { query, body, allow, timeoutMs, timeoutClass = false }) {
  let target = path;
  if (query) {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null) params.set(k, String(v));
    const qs = params.toString();
    if (qs) target += '?' + qs;
  }
  const url = client.url + target;
  let head = `${method} ${pool.prefix}${target} HTTP/1.1\r\nHost: ${pool.hostHeader}\r\nAccept: application/json\r\n`;
  if (client.token) {
    if (!HEADER_SAFE.test(String(client.token))) return null; // fetch says what is wrong with it
    head += `Authorization: Bearer ${client.token}\r\n`;
  }
  const text = body === undefined ? '' : JSON.stringify(body);
  if (body !== undefined) head += 'Content-Type: application/json\r\n';
  if (body !== undefined || method !== 'GET') head += `Content-Length: ${Buffer.byteLength(text)}\r\n`;
  head += '\r\n';
  const limit = timeoutMs ?? client.timeoutMs;
  let res;
  try {
    res = await pool.exchange(head, text, limit);
  } catch (err) {
    if (err?.timedOut) throw new LarderError(`${method} ${url}: no answer within ${limit} ms`, { code: 'client_timeout', cause: err });
    throw new LarderError(`${method} ${url}: cannot reach the Larder server (${err?.message ?? err}); is it running, and is LARDER_URL right?`, {
      code: 'connection_failed',
      cause: err,
    });
  }
  const { status } = res;
  if (status >= 300 && status < 400 && res.header('location')) return null;
  if (!(status >= 200 && status < 300) && !allow?.includes(status)) {
    throw answerError(method, path, status, res.text, res.header, timeoutClass);
  }
  if (status === 204) return { status, body: null };
  return jsonAnswer(method, path, status, res.text);
}

// What the test helper (testing.js) needs of this module beyond its API, under a symbol so that it
// stays out of the API: requests past the fence, stores made that way, the fence of relabellings a
// client's requests give first, and how many times this process built or discarded a build.
const fences = new WeakMap(); // Larder -> Set of () => Promise: relabellings due before its next request
let buildGeneration = 0;

/** `relabel` (idempotent, never rejecting) is run before `client`'s next request, until unfence(). */
function fence(client, relabel) {
  let due = fences.get(client);
  if (!due) fences.set(client, (due = new Set()));
  due.add(relabel);
}

function unfence(client, relabel) {
  fences.get(client)?.delete(relabel);
}

Object.defineProperty(Larder, Symbol.for('larder-sqlite.internals'), {
  value: Object.freeze({
    send,
    fence,
    unfence,
    buildGeneration: () => buildGeneration,
    /** createStore, past the fence, in local mode only. */
    async createStore(client, options, timeoutMs) {
      const body = pick(options, CREATE_FIELDS, 'createStore');
      const waits = body.build !== undefined;
      const { body: info } = await send(client, 'POST', '/stores', {
        body,
        timeoutMs: (timeoutMs ?? client.timeoutMs) + (waits ? body.timeout_ms ?? SERVER_WAIT_DEFAULT_MS : 0),
        timeoutClass: waits,
      });
      return new Store(client, info);
    },
  }),
});

/** A store `client` has just made: in remote mode checked out, or deleted again when that fails. */
async function madeStore(client, info) {
  const store = new Store(client, info);
  if (client.mode !== 'remote') return store;
  try {
    await checkOut(store);
  } catch (err) {
    await client.request('DELETE', store.base).catch(() => {});
    throw err;
  }
  return store;
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
function finishBuild(client, path) {
  return retryConflicts(() => client.request('POST', path));
}

/** `call()`, called again while it rejects with a 409 conflict, as its Retry-After says, up to BUILD_FINISH_ATTEMPTS times. */
async function retryConflicts(call) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
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

// Remote mode's local copies: a store's copy lives in a private folder of its own,
// larder-remote-XXXX/store.sqlite (0700), which close() and delete() remove, and so does the
// end of the process for any left over.
const copies = new WeakMap(); // Store -> {dir, file, stamp, closed}
const liveCopies = new Set(); // the folders not removed yet
let exitHookSet = false;

function removeLeftOverCopies() {
  for (const dir of liveCopies) {
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {}
  }
  liveCopies.clear();
}

/** What the local files look like now (size, mtime, inode of the database and its -wal), to tell a change. */
async function stampOf(file) {
  const parts = [];
  for (const f of [file, `${file}-wal`]) {
    try {
      const st = await stat(f, { bigint: true });
      parts.push(`${st.size}:${st.mtimeNs}:${st.ino}`);
    } catch (err) {
      if (err?.code !== 'ENOENT') throw err;
      parts.push('-');
    }
  }
  return parts.join('|');
}

/** A fresh local copy of `store`: GET /database into a private temporary folder. */
async function checkOut(store) {
  const dir = await mkdtemp(join(tmpdir(), 'larder-remote-'));
  liveCopies.add(dir);
  if (!exitHookSet) {
    exitHookSet = true;
    process.on('exit', removeLeftOverCopies);
  }
  const copy = { dir, file: join(dir, 'store.sqlite'), stamp: null, closed: false };
  try {
    await chmod(dir, 0o700);
    await download(store, copy);
  } catch (err) {
    liveCopies.delete(dir);
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  copies.set(store, copy);
}

/** GET /stores/{id}/database over the local copy: a temporary file beside it, renamed over it; stale -wal and -shm removed. */
async function download(store, copy) {
  const client = store.client;
  const part = join(copy.dir, `.download-${process.pid}-${Date.now()}`);
  const res = await client.fetch('GET', `${store.base}/database`, { timeoutMs: Math.max(client.timeoutMs, DEFAULT_DOWNLOAD_TIMEOUT_MS) });
  const hash = createHash('sha256');
  try {
    await pipeline(
      Readable.fromWeb(res.body),
      async function* (chunks) {
        for await (const chunk of chunks) {
          hash.update(chunk);
          yield chunk;
        }
      },
      createWriteStream(part, { mode: 0o600 })
    );
    const expected = res.headers.get('x-larder-sha256');
    const got = hash.digest('hex');
    if (expected && expected.toLowerCase() !== got) throw new Error(`its SHA-256 is ${got}, the server said ${expected}`);
    await rename(part, copy.file);
    await rm(`${copy.file}-wal`, { force: true });
    await rm(`${copy.file}-shm`, { force: true });
  } catch (err) {
    await rm(part, { force: true });
    throw new LarderError(`downloading store ${store.id} to ${copy.file} failed: ${err.message}`, { code: 'download_failed', cause: err });
  } finally {
    res.larderDone();
  }
  copy.stamp = await stampOf(copy.file);
}

/** Before a change on the server: checks the local copy in when it changed since the last check-out or check-in. */
async function checkInChanged(store) {
  const copy = copies.get(store);
  if (!copy || copy.closed) return;
  if ((await stampOf(copy.file)) !== copy.stamp) await store.checkIn();
}

/** After a change on the server: the local copy downloaded again. */
async function checkOutAgain(store) {
  const copy = copies.get(store);
  if (copy && !copy.closed) await download(store, copy);
}

// A zip of stored (uncompressed) entries, as PUT /database takes a database with its -wal. Node 20
// has no zlib.crc32: the CRC-32 (IEEE 802.3, as zip uses it) is computed here.
const CRC_TABLE = (() => {
  const table = new Int32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c;
  }
  return table;
})();

function crc32(bytes) {
  let c = -1;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ -1) >>> 0;
}

/** [{name, data}] as the bytes of a zip whose entries are stored, not compressed (no zip64: under 4 GiB in all). */
function storedZip(entries, when = new Date()) {
  const time = (when.getHours() << 11) | (when.getMinutes() << 5) | (when.getSeconds() >> 1);
  const date = ((Math.max(when.getFullYear(), 1980) - 1980) << 9) | ((when.getMonth() + 1) << 5) | when.getDate();
  const parts = [];
  const central = [];
  let offset = 0;
  for (const { name, data } of entries) {
    const nameBytes = Buffer.from(name, 'utf8');
    const crc = crc32(data);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(10, 4); // version needed: 1.0, stored
    local.writeUInt16LE(0x0800, 6); // the name is UTF-8
    local.writeUInt16LE(0, 8); // stored
    local.writeUInt16LE(time, 10);
    local.writeUInt16LE(date, 12);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(data.length, 18);
    local.writeUInt32LE(data.length, 22);
    local.writeUInt16LE(nameBytes.length, 26);
    local.writeUInt16LE(0, 28);
    const header = Buffer.alloc(46);
    header.writeUInt32LE(0x02014b50, 0);
    header.writeUInt16LE((3 << 8) | 20, 4); // made by: Unix, 2.0
    header.writeUInt16LE(10, 6);
    header.writeUInt16LE(0x0800, 8);
    header.writeUInt16LE(0, 10);
    header.writeUInt16LE(time, 12);
    header.writeUInt16LE(date, 14);
    header.writeUInt32LE(crc, 16);
    header.writeUInt32LE(data.length, 20);
    header.writeUInt32LE(data.length, 24);
    header.writeUInt16LE(nameBytes.length, 28);
    // extra, comment, disk, internal attributes: 0
    header.writeUInt32LE((0o100600 << 16) >>> 0, 38); // a regular file, rw-------
    header.writeUInt32LE(offset, 42);
    parts.push(local, nameBytes, data);
    central.push(header, nameBytes);
    offset += local.length + nameBytes.length + data.length;
    if (offset > 0xffffffff) throw new LarderError('the local copy is too big to check in as a zip (4 GiB at most)', { code: 'check_in_failed' });
  }
  const size = central.reduce((n, b) => n + b.length, 0);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(size, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...parts, ...central, end]);
}

export class Store {
  constructor(client, info) {
    this.client = client;
    this.info = info;
  }

  get id() {
    return this.info.id;
  }

  /** The SQLite file to open: in remote mode the local copy, else the server's live file (info.path). */
  get path() {
    return copies.get(this)?.file ?? this.info.path;
  }

  /** Whether the test works on a local copy (remote mode), which checkIn() hands back. */
  get remote() {
    return copies.has(this);
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

  /**
   * POST /stores/{id}/query: one statement; answers {columns, rows, changes}. In remote mode the
   * local copy is checked in first when it changed, and downloaded again when rows changed.
   */
  async query(sql, params) {
    const body = { sql };
    if (params !== undefined) body.params = params;
    await checkInChanged(this);
    const answer = await this.client.request('POST', `${this.base}/query`, { body });
    if (answer?.changes > 0) await checkOutAgain(this);
    return answer;
  }

  /** POST /stores/{id}/fixtures: fixtures by name, inline rows or SQL; answers {loaded, counts}. */
  async load(options = {}) {
    const body = pick(options, { fixtures: 'fixtures', rows: 'rows', sql: 'sql' }, 'load');
    await checkInChanged(this);
    const answer = await this.client.request('POST', `${this.base}/fixtures`, { body });
    await checkOutAgain(this);
    return answer;
  }

  /** POST /stores/{id}/migrate; answers {from, to, applied}. */
  async migrate({ to = 'latest' } = {}) {
    await checkInChanged(this);
    const answer = await this.client.request('POST', `${this.base}/migrate`, { body: { to } });
    if (answer?.applied?.length) await checkOutAgain(this);
    return answer;
  }

  /** POST /stores/{id}/reset: back to the contents it was created with, in place (and so is a local copy). */
  async reset() {
    this.info = await this.client.request('POST', `${this.base}/reset`);
    await checkOutAgain(this);
    return this.info;
  }

  /**
   * PUT /stores/{id}/database: hands the local copy back (remote mode), a zip of it and its -wal
   * when that is not empty; answers the store. Close your connections to it first. In local mode
   * there is nothing to hand back: it answers `info` as it is.
   */
  async checkIn() {
    const copy = copies.get(this);
    if (!copy) return this.info;
    if (copy.closed) throw new LarderError(`store ${this.id}: its local copy was closed; there is nothing to check in`, { code: 'check_in_failed' });
    const stamp = await stampOf(copy.file);
    const database = await readFile(copy.file);
    let wal = null;
    try {
      wal = await readFile(`${copy.file}-wal`);
    } catch (err) {
      if (err?.code !== 'ENOENT') throw err;
    }
    const name = basename(copy.file);
    const [raw, contentType] = wal?.length
      ? [storedZip([{ name, data: database }, { name: `${name}-wal`, data: wal }]), 'application/zip']
      : [database, 'application/vnd.sqlite3'];
    this.info = await retryConflicts(() =>
      this.client.request('PUT', `${this.base}/database`, {
        raw,
        contentType,
        timeoutMs: Math.max(this.client.timeoutMs, DEFAULT_DOWNLOAD_TIMEOUT_MS),
      })
    );
    copy.stamp = stamp;
    return this.info;
  }

  /** Removes the local copy (remote mode) and its folder; the store stays on the server. */
  async close() {
    const copy = copies.get(this);
    if (!copy || copy.closed) return;
    copy.closed = true;
    liveCopies.delete(copy.dir);
    await rm(copy.dir, { recursive: true, force: true });
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

  /** DELETE /stores/{id}; a local copy goes too. */
  async delete() {
    try {
      await this.client.request('DELETE', this.base);
    } finally {
      await this.close();
    }
  }
}

export default Larder;
