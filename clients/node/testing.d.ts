// Types of 'larder-sqlite/test', written by hand; test/types.test.js checks them against testing.js.

import type { TestContext } from 'node:test';
import type { describe as nodeDescribe, it as nodeIt } from 'node:test';
import type { CheckResult, CheckSnapshotsOptions, CreateStoreOptions, Larder, LarderMode, SnapshotResult, Store } from './index.js';

export interface WithStoreOptions extends CreateStoreOptions {
  /** The client; default: defaultLarder() (LARDER_URL, else a server the helper starts). */
  larder?: Larder;
  /** Where a failed test's artifact goes; default LARDER_ARTIFACTS, then larder-artifacts/. */
  artifacts?: string;
}

/**
 * A fresh store for the test, labelled storeLabel(t) unless `label` is given: deleted after a pass,
 * kept with its artifact saved after a failure (in remote mode its local copy checked in first).
 * In local mode the next store of the same spec is made ready in the background, and a passing
 * test's store is deleted in the background; the process's end waits for both.
 */
export declare function withStore(t: TestContext, options?: WithStoreOptions): Promise<Store>;

/** A store made ready for the next test is deleted, not handed out, once older than this (60000 ms) or a quarter of its ttl. */
export declare const READY_MAX_AGE_MS: number;
/**
 * How long into a test (100 ms) the store it got ready is relabelled to its label when the test's
 * client has not asked the server anything sooner; a test over sooner is not relabelled.
 */
export declare const RELABEL_AFTER_MS: number;
/** How many background requests (deletes, a ready store, relabellings) may be under way; beyond it a test's end waits for the oldest: 4. */
export declare const BACKGROUND_MAX: number;
/**
 * How many stores made ready make a batch (4): a passing test's store that kept the label it was
 * made ready with is deleted with the rest of its batch by one DELETE /stores?label=.
 */
export declare const DELETE_BATCH: number;

/**
 * Deletes the store made ready for a next test, if any, and waits until the helper's background
 * requests have settled (a failed one reported). A `node --test` run does it after each file's
 * last test, before the file's own `after` hooks; elsewhere call it before stopping a server the
 * tests used.
 */
export declare function settle(): Promise<void>;

/** Whether the test of context `t` has failed so far, as withStore judges it. */
export declare function testFailed(t: TestContext): boolean;

/** Where a failed test's artifact goes when neither `artifacts` nor LARDER_ARTIFACTS says: "larder-artifacts". */
export declare const DEFAULT_ARTIFACTS_DIR: string;
/** The longest file-safe test name in an artifact's file name: 120. */
export declare const ARTIFACT_NAME_MAX: number;

/**
 * Where a label's run prefix comes from when configure({run}) names none: the first [variable,
 * condition] pair whose variables are both set (an empty condition: none).
 */
export declare const RUN_VARIABLES: ReadonlyArray<readonly [string, string]>;
/** The longest label the server takes: 256 (bytes of UTF-8). */
export declare const LABEL_MAX_BYTES: number;

/**
 * The label the helper gives the store of the test of context `t`: RUN/PACKAGE/TEST (the test file
 * and the test's name path), or PACKAGE/TEST without a run prefix; at most LABEL_MAX_BYTES.
 */
export declare function storeLabel(t: TestContext): string;

/** The run prefix of the labels: configure({run}), else the first of RUN_VARIABLES set in `env`, else null. */
export declare function runPrefix(env?: Record<string, string | undefined>): string | null;

/** `label` cut to `maxBytes` (default LABEL_MAX_BYTES) of UTF-8 at a character boundary, keeping its start. */
export declare function cutLabel(label: string, maxBytes?: number): string;

/** A test name as artifact file names use it: [A-Za-z0-9._-], at most ARTIFACT_NAME_MAX characters. */
export declare function fileSafeName(name: string): string;

/**
 * node:test's `test`, whose failures withStore sees on every Node version; with `skip`, `todo` and
 * `only` but not node:test's other members (`mock`, ...), which is the shape node:test gives `it`.
 */
export declare const test: typeof nodeIt;
/** node:test's `it`, wrapped as `test` is. */
export declare const it: typeof nodeIt;
/** node:test's `describe`, which lets labels name the suites a test is in on a Node without t.fullName. */
export declare const describe: typeof nodeDescribe;
export { before, after, beforeEach, afterEach } from 'node:test';

/** A snapshot that failed the migration check. */
export declare class SnapshotCheckError extends Error {
  constructor(result: CheckResult | SnapshotResult);
  result: CheckResult | SnapshotResult;
}

export interface TestSnapshotsOptions extends CheckSnapshotsOptions {
  /** The client; default: defaultLarder() (LARDER_URL, else a server the helper starts). */
  larder?: Larder;
}

/**
 * Registers one node:test test per *.sqlite of `dir`, named by the file, that fails with a
 * SnapshotCheckError when Larder.checkSnapshot does; answers the file names.
 */
export declare function testSnapshots(dir: string, options: TestSnapshotsOptions): string[];

/** Settings of the client the helper makes when a test names none. */
export interface HelperSettings {
  /** The server to use; default LARDER_URL. With neither, the helper starts one (`larder up`). */
  url?: string;
  /** Sent as `Authorization: Bearer <token>`; default LARDER_TOKEN. */
  token?: string | null;
  /** How long an ordinary request may take, in ms (default 120000). */
  timeoutMs?: number;
  /** The larder binary that starts a server; default LARDER_BINARY, the packaged one, `larder` on PATH. */
  binary?: string;
  /** The fixtures folder of a server the helper starts; default LARDER_FIXTURES, else what `larder up` finds. */
  fixtures?: string;
  /** More `larder serve` settings for a server the helper starts, e.g. ['--build-lease-seconds', '60']. */
  serverArgs?: string[];
  /** The run prefix of the labels the helper gives; default: the first of RUN_VARIABLES that is set. */
  run?: string | null;
  /** 'remote' or 'local'; default LARDER_MODE, else remote for a URL whose host is not loopback, local for a server the helper starts. */
  mode?: LarderMode | null;
}

/** Sets what the helper's own client uses, before the first test needs it; calling it again drops that client. */
export declare function configure(settings?: HelperSettings): void;

/**
 * The client withStore and testSnapshots use when given none, made once per process: of the URL
 * configured, else of the server `larder up` prints. Rejects with a LarderError ("no_server", "server_start_failed").
 */
export declare function defaultLarder(): Promise<Larder>;
