// Types of the Larder client (hand-written; the code is index.js).

export declare const DEFAULT_URL: string;

export type Counts = Record<string, number>;

export interface StoreInfo {
  id: string;
  /** The live SQLite file, for test code on the same machine. */
  path: string;
  template: string | null;
  version: string | null;
  snapshot?: string | null;
  fixtures?: string[];
  label: string | null;
  counts: Counts;
  created_at: string;
  expires_at: string;
  keep: boolean;
  size_bytes: number;
  links: Record<string, string>;
  [field: string]: unknown;
}

export interface LarderOptions {
  /** Default: LARDER_URL, then http://127.0.0.1:7464. */
  url?: string;
  /** Sent as `Authorization: Bearer <token>`. Default: LARDER_TOKEN. */
  token?: string | null;
  /** How long an ordinary request may take, in ms (default 60000). */
  timeoutMs?: number;
}

export interface CreateStoreOptions {
  template?: string;
  fixtures?: string[];
  /** Default on the server: "latest"; null keeps a snapshot at its own version. */
  version?: string | null;
  snapshot?: string | null;
  label?: string;
  /** Key of an app-built template (POST /builds). Not with template or from. */
  build?: string;
  /** Id of a live store to fork. Not with template or build. */
  from?: string;
  ttlSeconds?: number;
}

export interface QueryResult {
  columns: string[];
  rows: unknown[][];
  changes: number;
  [field: string]: unknown;
}

export interface LoadOptions {
  fixtures?: string[];
  rows?: Record<string, Array<Record<string, unknown>>>;
  sql?: string;
}

export interface LoadResult {
  loaded: string[];
  counts: Counts;
}

export interface MigrateResult {
  from: string | null;
  to: string | null;
  applied: Array<{ version: string; name: string; ms: number }>;
}

export interface DiffRow {
  op: 'insert' | 'update' | 'delete';
  /** The row's key: its declared primary key, else its rowid. */
  key: Record<string, unknown>;
  /** The row before (null for an insert); a blob is {base64: "..."}. */
  old: Record<string, unknown> | null;
  /** The row after (null for a delete). */
  new: Record<string, unknown> | null;
}

export interface TableDiff {
  inserted: number;
  updated: number;
  deleted: number;
  /** True when `rows` lists fewer rows than changed (see `limit`). */
  truncated: boolean;
  rows: DiffRow[];
}

export interface SchemaChange {
  type: 'table' | 'column' | 'index' | 'foreign_keys' | 'view' | 'trigger';
  name: string;
  /** The table of a column or an index. */
  table?: string;
  old?: unknown;
  new?: unknown;
}

export interface Diff {
  /** What the store was made from, in words. */
  base: string;
  schema: { added: SchemaChange[]; removed: SchemaChange[]; changed: SchemaChange[] };
  /** Changed tables only. */
  tables: Record<string, TableDiff>;
}

export interface DiffOptions {
  /** Rows listed per table, 0..10000 (server default 100); the counts are always whole. */
  limit?: number;
  /** Only these tables (array or "a,b"). */
  tables?: string[] | string;
}

export interface ErrorOptions {
  status?: number;
  code?: string;
  details?: Record<string, unknown>;
  requestId?: string | null;
  retryAfter?: number | null;
  cause?: unknown;
}

/** An error answer of the server, or a failure to reach it (status 0). */
export declare class LarderError extends Error {
  constructor(message: string, options?: ErrorOptions);
  /** HTTP status; 0 when no answer came (code "connection_failed" or "client_timeout"). */
  status: number;
  /** The server's error code: "store_not_found", "unknown_template", "sql_error", ... */
  code: string;
  details: Record<string, any>;
  /** X-Request-Id of the answer, to find it in the server's log. */
  requestId: string | null;
  /** Retry-After of a 409, in seconds. */
  retryAfter: number | null;
}

/** A wait whose condition did not hold in time. */
export declare class LarderTimeout extends LarderError {
  /** The last counts the server saw. */
  readonly counts: Counts;
}

export declare class Larder {
  constructor(options?: LarderOptions);
  readonly url: string;
  readonly token: string | null;
  timeoutMs: number;
  health(): Promise<{ status: string; version: string; sqlite_version: string; stores: number }>;
  templates(): Promise<Array<Record<string, unknown>>>;
  createStore(options?: CreateStoreOptions): Promise<Store>;
  getStore(id: string): Promise<Store>;
  listStores(filter?: { label?: string; template?: string; limit?: number; cursor?: string }): Promise<StoreInfo[]>;
  /** Low level: one request, answering the parsed JSON body (null for 204). */
  request(method: string, path: string, options?: { query?: Record<string, unknown>; body?: unknown; timeoutMs?: number; timeoutClass?: boolean }): Promise<any>;
}

export declare class Store {
  constructor(client: Larder, info: StoreInfo);
  readonly client: Larder;
  /** The store as the server last described it. */
  info: StoreInfo;
  readonly id: string;
  readonly path: string;
  refresh(): Promise<StoreInfo>;
  counts(options?: { tables?: string[] | string }): Promise<Counts>;
  /** Resolves with the counts once `condition` ("t>=3", comma-separated for several) holds; rejects with LarderTimeout. */
  wait(condition: string, options?: { timeoutMs?: number; tables?: string[] | string }): Promise<Counts>;
  query(sql: string, params?: unknown[] | Record<string, unknown>): Promise<QueryResult>;
  load(options: LoadOptions): Promise<LoadResult>;
  migrate(options?: { to?: string }): Promise<MigrateResult>;
  reset(): Promise<StoreInfo>;
  /** What changed since the store was created; rejects with a 400 LarderError for an unknown table or a bad limit. */
  diff(options?: DiffOptions): Promise<Diff>;
  schema(): Promise<{ tables: Array<Record<string, unknown>> }>;
  /** Streams the artifact zip (store.sqlite, manifest.json) into `path`; resolves with its absolute path. */
  artifact(path: string, options?: { compression?: 'deflate' | 'store' }): Promise<string>;
  keep(): Promise<StoreInfo>;
  delete(): Promise<void>;
}

export default Larder;
