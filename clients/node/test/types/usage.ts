// Every export of the package, used as a caller would; each @ts-expect-error is
// a misuse the typings must refuse. Compiled by test/types.test.js, never run.

import Default, {
  BUILD_FINISH_ATTEMPTS,
  BUILD_POLL_MS,
  BUILD_TIMEOUT_DEFAULT_MS,
  DEFAULT_DOWNLOAD_TIMEOUT_MS,
  DEFAULT_REQUEST_TIMEOUT_MS,
  DEFAULT_URL,
  Larder,
  LarderError,
  LarderTimeout,
  RETRY_AFTER_DEFAULT_MS,
  RETRY_AFTER_MAX_MS,
  SERVER_WAIT_DEFAULT_MS,
  Store,
  formatCheckFailure,
  resolveMode,
  snapshotFiles,
  type BuildInfo,
  type CheckReference,
  type CheckResult,
  type Counts,
  type Diff,
  type Health,
  type LarderMode,
  type LoadResult,
  type MigrateResult,
  type QueryResult,
  type SnapshotResult,
  type StoreInfo,
  type StoreSchema,
  type TemplateSummary,
} from 'larder-sqlite';
import {
  ARTIFACT_NAME_MAX,
  DEFAULT_ARTIFACTS_DIR,
  LABEL_MAX_BYTES,
  RUN_VARIABLES,
  SnapshotCheckError,
  after,
  afterEach,
  before,
  beforeEach,
  configure,
  cutLabel,
  defaultLarder,
  describe,
  fileSafeName,
  it,
  runPrefix,
  storeLabel,
  test,
  testFailed,
  testSnapshots,
  withStore,
} from 'larder-sqlite/test';

const numbers: number[] = [
  BUILD_FINISH_ATTEMPTS,
  BUILD_POLL_MS,
  BUILD_TIMEOUT_DEFAULT_MS,
  DEFAULT_DOWNLOAD_TIMEOUT_MS,
  DEFAULT_REQUEST_TIMEOUT_MS,
  RETRY_AFTER_DEFAULT_MS,
  RETRY_AFTER_MAX_MS,
  SERVER_WAIT_DEFAULT_MS,
  ARTIFACT_NAME_MAX,
  LABEL_MAX_BYTES,
];
const strings: string[] = [DEFAULT_URL, DEFAULT_ARTIFACTS_DIR, ...RUN_VARIABLES.map(([name, condition]) => name + condition)];
// @ts-expect-error RUN_VARIABLES is frozen
RUN_VARIABLES.push(['MY_RUN', '']);

export async function client(): Promise<unknown[]> {
  const larder: Larder = new Default({ url: DEFAULT_URL, token: null, timeoutMs: 1000 });
  const plain = new Larder();
  const url: string = plain.url;
  plain.timeoutMs = 5000;
  // @ts-expect-error the url is read-only
  plain.url = 'http://elsewhere';
  // @ts-expect-error an unknown option
  new Larder({ port: 7464 });
  const remoteClient = new Larder({ url: 'http://larder.ci.internal:7464', mode: 'remote' });
  const mode: LarderMode = remoteClient.mode;
  new Larder({ mode: null });
  // @ts-expect-error remote or local
  new Larder({ mode: 'cloud' });
  // @ts-expect-error the mode is the client's
  remoteClient.mode = 'local';
  const modes: LarderMode[] = [resolveMode(), resolveMode({ url: 'http://10.0.0.7:7464' }), resolveMode({ mode: 'local', url: null })];

  const health: Health = await larder.health();
  const { status, version, sqlite_version, stores } = health;
  const templates: TemplateSummary[] = await larder.templates();
  const latest: string | null | undefined = templates[0]?.latest;

  const store: Store = await larder.createStore({
    template: 'gallery',
    fixtures: ['artists'],
    version: null,
    snapshot: null,
    label: 'a test',
    ttlSeconds: 60,
  });
  await larder.createStore({ build: 'key', timeoutMs: 30_000 });
  await larder.createStore({ from: store.id });
  await larder.createStore();
  // @ts-expect-error a misspelt option
  await larder.createStore({ tempalte: 'gallery' });
  // @ts-expect-error fixtures are an array of names
  await larder.createStore({ fixtures: 'artists' });

  const again: Store = await larder.getStore(store.id);
  const listed: StoreInfo[] = await larder.listStores({ label: 'a test', template: 'gallery', limit: 10, cursor: 'c' });

  const key: string = await larder.build('key', async (path: string) => path.length, { label: 'migrations', timeoutMs: 1000 });
  await larder.build('key', () => {});
  // @ts-expect-error migrate is a function
  await larder.build('key', 'migrate.sh');
  const builds: BuildInfo[] = await larder.builds();
  const build: BuildInfo = await larder.buildInfo(key);
  const state: 'building' | 'ready' = build.state;
  const nothing: void = await larder.discardBuild(key);

  const uploaded: Store = await larder.upload('test/snapshots/v1.sqlite', { label: 'v1', ttlSeconds: 60 });
  await larder.upload(new URL('file:///tmp/v1.sqlite'));
  await larder.upload(new Uint8Array(0));
  // @ts-expect-error a number is no database
  await larder.upload(42);

  const references: CheckReference[] = [{ build: key }, { template: 'gallery', version: '6' }, { template: 'gallery' }, { store: uploaded }, { store: 'st_1' }];
  const checked: CheckResult = await larder.check(uploaded, { build: key }, { snapshot: 'v1.sqlite', expect: { counts: { notes: 3 } }, data: false });
  await larder.check('st_1', { template: 'gallery' });
  // @ts-expect-error against names what the store must match
  await larder.check('st_1', { version: '6' });
  const passed: boolean = checked.passed;
  const failures: string[] = checked.failures;

  const migrate = (path: string) => path;
  const one: SnapshotResult = await larder.checkSnapshot('test/snapshots/v1.sqlite', {
    migrate,
    build: key,
    expect: null,
    data: true,
    label: 'v1',
    snapshot: 'v1.sqlite',
  });
  await larder.checkSnapshot('v1.sqlite', { migrate: async () => {}, template: 'gallery', version: '6' });
  await larder.checkSnapshot('v1.sqlite', { migrate, store: uploaded });
  // @ts-expect-error migrate is required
  await larder.checkSnapshot('v1.sqlite', { build: key });
  const all: SnapshotResult[] = await larder.checkSnapshots('test/snapshots', { migrate, build: key, data: false });
  // @ts-expect-error each snapshot has its own expectations
  await larder.checkSnapshots('test/snapshots', { migrate, build: key, expect: null });
  const kept: boolean = one.kept && all.every((r) => r.kept);
  const text: string = formatCheckFailure(one) + formatCheckFailure(checked);
  const files: string[] = snapshotFiles('test/snapshots');

  const answer: unknown = await larder.request('DELETE', '/stores', { query: { label_prefix: 'run/' } });
  const exchanged: { status: number; body: unknown } = await larder.exchange('POST', '/stores', {
    body: { template: 'gallery' },
    raw: new Uint8Array(0),
    contentType: 'application/vnd.sqlite3',
    allow: [422],
    timeoutMs: 1000,
    timeoutClass: true,
  });

  const info: StoreInfo = store.info;
  const expires: string = info.expires_at ?? 'kept forever';
  const id: string = store.id;
  const path: string = store.path;
  const owner: Larder = store.client;
  // @ts-expect-error the id is the server's
  store.id = 'st_2';
  const refreshed: StoreInfo = await store.refresh();
  const counts: Counts = await store.counts({ tables: ['artists'] });
  await store.counts({ tables: 'artists,artworks' });
  await store.counts();
  const waited: Counts = await store.wait('artworks>=12', { timeoutMs: 5000, tables: ['artworks'] });
  // @ts-expect-error a condition is text
  await store.wait(12);
  const rows: QueryResult = await store.query('SELECT * FROM artists WHERE id = ?', [1]);
  await store.query('SELECT * FROM artists WHERE id = :id', { id: 1 });
  await store.query('SELECT 1');
  const cell: unknown = rows.truncated ? null : rows.rows[0]?.[0];
  const loaded: LoadResult = await store.load({ fixtures: ['artworks'] });
  await store.load({ rows: { albums: [{ id: 1, title: 'Highlights' }] } });
  await store.load({ sql: 'DELETE FROM albums' });
  const migrated: MigrateResult = await store.migrate({ to: '5' });
  await store.migrate();
  const reset: StoreInfo = await store.reset();
  const isRemote: boolean = store.remote;
  const checkedIn: StoreInfo = await store.checkIn();
  const closed: void = await store.close();
  // @ts-expect-error whether it is remote is the client's mode
  store.remote = false;
  const diff: Diff = await store.diff({ limit: 10, tables: ['artists'] });
  const op: 'insert' | 'update' | 'delete' | undefined = diff.tables.artists?.rows[0]?.op;
  const schema: StoreSchema = await store.schema();
  const zip: string = await store.artifact('artifacts/a.zip', { compression: 'store' });
  // @ts-expect-error deflate or store
  await store.artifact('a.zip', { compression: 'gzip' });
  const keptInfo: StoreInfo = await store.keep();
  const judged: CheckResult = await store.check({ build: key }, { data: false });
  await store.delete();
  new Store(larder, info);

  try {
    await store.wait('artworks>=100');
  } catch (err) {
    if (err instanceof LarderTimeout) {
      const last: Counts = err.counts;
      // @ts-expect-error the counts are the server's
      err.counts = {};
      return [last];
    }
    if (err instanceof LarderError) {
      const described: [number, string, Record<string, any>, string | null, number | null] = [
        err.status,
        err.code,
        err.details,
        err.requestId,
        err.retryAfter,
      ];
      return described;
    }
  }
  const made = new LarderError('no', { status: 409, code: 'conflict', details: {}, requestId: null, retryAfter: 1, cause: new Error('x') });
  const timeout: LarderError = new LarderTimeout('late', { status: 408, code: 'timeout' });

  return [
    numbers, strings, url, status, version, latest, expires, sqlite_version, stores, templates, again, listed, builds, state, nothing,
    references, passed, failures, kept, text, files, answer, exchanged, info, id, path, owner, refreshed, counts,
    waited, cell, loaded, migrated, reset, op, schema, zip, keptInfo, judged, made, timeout, mode, modes, isRemote, checkedIn, closed,
  ];
}

// The node:test helper, as a test file uses it.
configure({
  url: 'http://127.0.0.1:7464',
  token: null,
  timeoutMs: 1000,
  binary: '/usr/bin/larder',
  fixtures: 'fixtures',
  serverArgs: ['--build-lease-seconds', '60'],
  run: 'nightly-42',
});
configure({ run: null });
configure({ mode: 'remote' });
configure({ mode: null });
// @ts-expect-error remote or local
configure({ mode: 'cloud' });
configure();
// @ts-expect-error serverArgs is an array of strings
configure({ serverArgs: '--build-lease-seconds 60' });
// @ts-expect-error an unknown setting
configure({ port: 7464 });

const label: string = cutLabel('a label', LABEL_MAX_BYTES) + cutLabel('b') + fileSafeName('a test');
const prefix: string | null = runPrefix({ LARDER_RUN: 'nightly-42' }) ?? runPrefix();
export const shared: Promise<Larder> = defaultLarder();

describe('albums', () => {
  before(() => {});
  beforeEach(() => {});
  afterEach(() => {});
  after(() => {});

  test('a store of its own', async (t) => {
    const larder = await defaultLarder();
    const store: Store = await withStore(t, { template: 'gallery', fixtures: ['artists'], larder, artifacts: 'larder-artifacts' });
    await withStore(t, { build: 'key' });
    await withStore(t);
    // @ts-expect-error a misspelt option
    await withStore(t, { artifact: 'larder-artifacts' });
    const failed: boolean = testFailed(t);
    const own: string = storeLabel(t) + label + (prefix ?? '');
    await t.test('a subtest', async (s) => {
      await withStore(s, { label: own + store.id + failed });
    });
  });
  test('with options', { timeout: 1000 }, async () => {});
  test.skip('skipped', () => {});
  test.todo('to do');
  test.only('only this', () => {});
  // @ts-expect-error the helper's test has node:test's skip, todo and only, not its mock
  test.mock.fn();
  it('an it', (t, done) => {
    done(t.name === '' ? new Error('no name') : undefined);
  });
  it.skip('skipped');
  describe.skip('a skipped suite', () => {});
});

const dir = 'test/snapshots';
const registered: string[] = testSnapshots(dir, { migrate: (path) => path, build: 'key', data: false, larder: new Larder() });
testSnapshots(dir, { migrate: async () => {}, template: 'gallery', version: '6' });
// @ts-expect-error each snapshot has its own expectations
testSnapshots(dir, { migrate: () => {}, build: 'key', expect: null });

export function failing(result: CheckResult | SnapshotResult): SnapshotCheckError {
  const err = new SnapshotCheckError(result);
  const judged: CheckResult = err.result;
  const message: string = err.message;
  return judged.passed || message === '' ? err : new SnapshotCheckError({ ...judged, failures: [...registered] });
}
