// Types of 'larder/test', the node:test helper (the code is testing.js).

import type { TestContext } from 'node:test';
import type { test as nodeTest, it as nodeIt } from 'node:test';
import type { CheckResult, CheckSnapshotsOptions, CreateStoreOptions, Larder, SnapshotResult, Store } from './index.js';

export interface WithStoreOptions extends CreateStoreOptions {
  /** The client; default one from LARDER_URL / LARDER_TOKEN. */
  larder?: Larder;
  /** Where a failed test's artifact goes; default LARDER_ARTIFACTS, then larder-artifacts/. */
  artifacts?: string;
}

/**
 * A fresh store for the test, labelled with its name; deleted in t.after when
 * the test passed, kept with its artifact saved when it failed.
 */
export declare function withStore(t: TestContext, options?: WithStoreOptions): Promise<Store>;

/** Whether the test of context `t` has failed so far, as withStore judges it. */
export declare function testFailed(t: TestContext): boolean;

/** Where a failed test's artifact goes when neither `artifacts` nor LARDER_ARTIFACTS says: "larder-artifacts". */
export declare const DEFAULT_ARTIFACTS_DIR: string;
/** The longest file-safe test name in an artifact's file name: 120. */
export declare const ARTIFACT_NAME_MAX: number;

/** A test name as artifact file names use it: [A-Za-z0-9._-], at most 120 characters. */
export declare function fileSafeName(name: string): string;

/** node:test's `test`, whose failures withStore sees on every Node version. */
export declare const test: typeof nodeTest;
/** node:test's `it`, wrapped as `test` is. */
export declare const it: typeof nodeIt;
export { describe, before, after, beforeEach, afterEach } from 'node:test';

/** A snapshot that failed the migration check. */
export declare class SnapshotCheckError extends Error {
  constructor(result: CheckResult | SnapshotResult);
  result: CheckResult | SnapshotResult;
}

export interface TestSnapshotsOptions extends CheckSnapshotsOptions {
  /** The client; default one from LARDER_URL / LARDER_TOKEN. */
  larder?: Larder;
}

/**
 * Registers one node:test test per *.sqlite of `dir`, named by the file:
 * Larder.checkSnapshot, failing with a SnapshotCheckError (snapshot, versions,
 * kept store, each failure on a line). Answers the file names.
 */
export declare function testSnapshots(dir: string, options: TestSnapshotsOptions): string[];
