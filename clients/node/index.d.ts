// Types of the Larder client, written by hand; test/types.test.js checks them against index.js.

/** The defaults every Larder client shares (clients/defaults.json), in ms where they are times. */
export declare const DEFAULT_URL: string;
export declare const DEFAULT_REQUEST_TIMEOUT_MS: number;
export declare const DEFAULT_DOWNLOAD_TIMEOUT_MS: number;
export declare const SERVER_WAIT_DEFAULT_MS: number;
export declare const BUILD_TIMEOUT_DEFAULT_MS: number;
export declare const BUILD_POLL_MS: number;
export declare const BUILD_FINISH_ATTEMPTS: number;
export declare const RETRY_AFTER_DEFAULT_MS: number;
export declare const RETRY_AFTER_MAX_MS: number;

export type Counts = Record<string, number>;

export interface StoreInfo {
  id: string;
  /** The live SQLite file on the server's machine, for test code there; in remote mode not yours to open (use Store.path). */
  path: string;
  template: string | null;
  version: string | null;
  snapshot: string | null;
  fixtures: string[];
  /** The key of the app-built template it is a copy of. */
  build: string | null;
  label: string | null;
  counts: Counts;
  created_at: string;
  /** Null when it is kept forever. */
  expires_at: string | null;
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
  /** How long an ordinary request may take, in ms (default 120000); a wait's own timeout goes on top. */
  timeoutMs?: number;
  /** Default: LARDER_MODE, else 'remote' when the URL's host is not a loopback address, else 'local'. */
  mode?: LarderMode | null;
}

/** 'remote': the test works on a local copy of each store, which it checks in; 'local': on the server's file. */
export type LarderMode = 'local' | 'remote';

/**
 * The mode a client works in: `mode` when given, else LARDER_MODE ('remote' or 'local'; another value
 * is an error), else 'remote' when `url`'s host is not localhost, 127.0.0.0/8 or ::1; `url` null (a
 * server the helper starts) is 'local'.
 */
export declare function resolveMode(options?: { mode?: LarderMode | null; url?: string | null }): LarderMode;

export interface CreateStoreOptions {
  template?: string;
  fixtures?: string[];
  /** Default on the server: "latest"; null keeps a snapshot at its own version. */
  version?: string | null;
  snapshot?: string | null;
  label?: string;
  /** Key of an app-built template (see Larder.build). Not with template or from. */
  build?: string;
  /** Id of a live store to fork. Not with template or build. */
  from?: string;
  ttlSeconds?: number;
  /** With `build`: how long the server waits for that build, in ms (default 30000, at most 300000), before a LarderTimeout. */
  timeoutMs?: number;
}

/** An app-built template, as GET /builds/{key} describes it. */
export interface BuildInfo {
  key: string;
  state: 'building' | 'ready';
  label: string | null;
  /** The file to build: only in the answer to the client that builds it. */
  path?: string;
  started_at?: string;
  /** When a build still building is discarded (its lease runs out). */
  expires_at?: string;
  finished_at?: string;
  /** Ready builds: the version its migrator's bookkeeping says (django_migrations, ...), if any. */
  version?: string | null;
  /** Ready builds: rows per user table. */
  counts?: Counts;
  size_bytes?: number;
  /** Ready builds: finished through this server, found in the cache folder it shares, or downloaded from the fleet's bucket. */
  origin?: 'built' | 'machine' | 'fleet';
  links: Record<string, string>;
  [field: string]: unknown;
}

export interface BuildOptions {
  /** Shown in GET /builds and on the dashboard. */
  label?: string;
  /** How long, in all, to wait for a build another client runs, in ms (default 300000). */
  timeoutMs?: number;
}

/** What an app-migrated store must match (`POST /stores/{id}/check`'s `against`): exactly one. */
export type CheckReference =
  | { build: string }
  | { template: string; version?: string }
  | { store: string | Store };

/** The `.expect.json` shape. */
export interface Expect {
  version?: string | number;
  counts?: Record<string, number>;
  min_counts?: Record<string, number>;
  /** SQL that must be true after migrating. */
  assert?: string[];
  /** SQL that must be true on the upload as it arrived. */
  before?: string[];
  drops?: unknown;
  moves?: unknown;
  deletes?: unknown;
}

export interface CheckOptions {
  /** The snapshot's name, as the result (and its JUnit test case) names it. */
  snapshot?: string;
  expect?: Expect | null;
  /** false skips the rule that every column that held data still holds it. */
  data?: boolean;
}

/** One check's result (200 passed, 422 failed). */
export interface CheckResult {
  template: string | null;
  kind: 'app' | 'snapshot' | 'round_trip' | 'template';
  snapshot: string | null;
  from_version: string | null;
  to_version: string | null;
  passed: boolean;
  ms: number;
  /** One message per failure, e.g. "notes.tag held 2 non-NULL values; the migrated store has 0". */
  failures: string[];
  notes: string[];
  [field: string]: unknown;
}

export interface CheckSnapshotOptions {
  /** The app's own migrator, run on the uploaded store's file (sync or async); it must close its connections. */
  migrate: (path: string) => unknown | Promise<unknown>;
  /** The reference, exactly one of: an app build's key, ... */
  build?: string;
  /** ... a template (at `version`, default "latest"), ... */
  template?: string;
  version?: string;
  /** ... or a live store. */
  store?: string | Store;
  /** Default: NAME.expect.json beside NAME.sqlite, parsed (null when there is none). */
  expect?: Expect | null;
  data?: boolean;
  /** The store's label; default the file's name. */
  label?: string;
  /** The name the result carries; default the file's name. */
  snapshot?: string;
}

export type CheckSnapshotsOptions = Omit<CheckSnapshotOptions, 'expect' | 'snapshot' | 'label'>;

/** checkSnapshot's result: the check's, with the uploaded store's id and whether it was kept (failed). */
export interface SnapshotResult extends CheckResult {
  store: string;
  kept: boolean;
}

/** A failed check as a test failure's text: snapshot, versions, kept store, then each failure on a line. */
export declare function formatCheckFailure(result: CheckResult | SnapshotResult): string;
/** The *.sqlite file names of `dir`, sorted. */
export declare function snapshotFiles(dir: string): string[];

export interface QueryResult {
  columns: string[];
  rows: unknown[][];
  changes: number;
  /** True when the server cut the rows short (its row or size limit). */
  truncated: boolean;
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
  applied: Array<{ version: string; name: string; ms: number; direction: 'up' | 'down' | 'repeatable' }>;
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

export interface Health {
  status: 'ok';
  version: string;
  sqlite_version: string;
  stores: number;
  /** Templates in the fixtures folder. */
  templates: number;
  started_at: string;
  /** The root's file system, and whether copies there share blocks (any size in well under a millisecond, no room taken). */
  storage: { file_system: string | null; shares_blocks: boolean };
  /** The fleet's bucket (--cache-url), whether this server only reads it, and where kept stores' artifacts go; never credentials. */
  cache: { url: string | null; read_only: boolean; artifacts_url: string | null };
}

/** A template, as GET /templates lists it. */
export interface TemplateSummary {
  name: string;
  /** The migration tool whose layout it has: "golang-migrate", "prisma", "plain", ... */
  format: string;
  versions: string[];
  latest: string | null;
  fixtures: string[];
  default_fixtures: string[];
  snapshots: string[];
}

/** GET /stores/{id}/schema: tables first, then views and triggers, as far as the answer's size limit allows. */
export interface StoreSchema {
  tables: Array<Record<string, unknown>>;
  views: Array<Record<string, unknown>>;
  triggers: Array<Record<string, unknown>>;
  truncated: boolean;
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

/** A wait whose condition did not hold in time (a count wait, a build wait). */
export declare class LarderTimeout extends LarderError {
  /** The last counts the server saw. */
  readonly counts: Counts;
}

export declare class Larder {
  constructor(options?: LarderOptions);
  readonly url: string;
  readonly token: string | null;
  timeoutMs: number;
  /** 'remote': every Store it answers works on a local copy (see Store.checkIn). */
  readonly mode: LarderMode;
  health(): Promise<Health>;
  templates(): Promise<TemplateSummary[]>;
  createStore(options?: CreateStoreOptions): Promise<Store>;
  getStore(id: string): Promise<Store>;
  listStores(filter?: { label?: string; template?: string; limit?: number; cursor?: string }): Promise<StoreInfo[]>;
  /**
   * Makes sure the app-built template `key` (your fingerprint of the migrations) is built, by this
   * client's `migrate(path)` or another's, and resolves with `key` for `createStore({ build: key })`.
   */
  build(key: string, migrate: (path: string) => unknown | Promise<unknown>, options?: BuildOptions): Promise<string>;
  /** GET /builds: every build, building or ready. */
  builds(): Promise<BuildInfo[]>;
  /** GET /builds/{key}; rejects with a 404 LarderError (code "unknown_build") when there is none. */
  buildInfo(key: string): Promise<BuildInfo>;
  /** DELETE /builds/{key}: the next build(key) builds it again. */
  discardBuild(key: string): Promise<void>;
  /** POST /stores with the SQLite file (a path, or its bytes) as the body: a store of the file as it is. */
  upload(file: string | URL | Uint8Array, options?: { label?: string; ttlSeconds?: number }): Promise<Store>;
  /** POST /stores/{id}/check: judges an upload the app migrated; resolves with the result, passed or not. */
  check(store: Store | string, against: CheckReference, options?: CheckOptions): Promise<CheckResult>;
  /** Uploads `path`, runs `migrate(store.path)` and checks it; the store is kept when it failed. */
  checkSnapshot(path: string, options: CheckSnapshotOptions): Promise<SnapshotResult>;
  /** checkSnapshot for every *.sqlite of `dir`, in file name order. */
  checkSnapshots(dir: string, options: CheckSnapshotsOptions): Promise<SnapshotResult[]>;
  /** Low level: one request, answering the parsed JSON body (null for 204). */
  request(method: string, path: string, options?: RequestOptions): Promise<any>;
  /** Low level: as `request`, with the answer's HTTP status. */
  exchange(method: string, path: string, options?: RequestOptions): Promise<{ status: number; body: any }>;
}

export interface RequestOptions {
  query?: Record<string, unknown>;
  body?: unknown;
  /** A raw body (not JSON), sent with `contentType`. */
  raw?: Uint8Array;
  contentType?: string;
  /** Non-2xx statuses whose body is an answer rather than an error. */
  allow?: number[];
  timeoutMs?: number;
  timeoutClass?: boolean;
}

export declare class Store {
  constructor(client: Larder, info: StoreInfo);
  readonly client: Larder;
  /** The store as the server last described it (its `path` is the server's). */
  info: StoreInfo;
  readonly id: string;
  /** The SQLite file to open: in remote mode the local copy (larder-remote-XXXX/store.sqlite), else the server's live file. */
  readonly path: string;
  /** Whether it works on a local copy (remote mode). */
  readonly remote: boolean;
  refresh(): Promise<StoreInfo>;
  counts(options?: { tables?: string[] | string }): Promise<Counts>;
  /** Resolves with the counts once `condition` ("t>=3", comma-separated for several) holds; rejects with LarderTimeout. */
  wait(condition: string, options?: { timeoutMs?: number; tables?: string[] | string }): Promise<Counts>;
  /** In remote mode the local copy is checked in first when it changed, and downloaded again when rows changed. */
  query(sql: string, params?: unknown[] | Record<string, unknown>): Promise<QueryResult>;
  load(options: LoadOptions): Promise<LoadResult>;
  migrate(options?: { to?: string }): Promise<MigrateResult>;
  reset(): Promise<StoreInfo>;
  /**
   * Remote mode: PUT /stores/{id}/database with the local copy (a zip with its -wal when that is not
   * empty), resolving with the store; close your connections to it first. Local mode: nothing to do.
   */
  checkIn(): Promise<StoreInfo>;
  /** Removes the local copy and its folder (remote mode); the store stays on the server. */
  close(): Promise<void>;
  /** What changed since the store was created; rejects with a 400 LarderError for an unknown table or a bad limit. */
  diff(options?: DiffOptions): Promise<Diff>;
  schema(): Promise<StoreSchema>;
  /** Streams the artifact zip (store.sqlite, manifest.json) into `path`; resolves with its absolute path. */
  /** With the store's creation state (base.sqlite) unless `base: false`, so `larder open` shows what the test changed. */
  artifact(path: string, options?: { compression?: 'deflate' | 'store'; base?: boolean }): Promise<string>;
  keep(): Promise<StoreInfo>;
  /** DELETE /stores/{id}; a local copy goes too. */
  delete(): Promise<void>;
  /** POST /stores/{id}/check: see Larder.check. */
  check(against: CheckReference, options?: CheckOptions): Promise<CheckResult>;
}

export default Larder;
