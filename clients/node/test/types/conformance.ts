// The code's own types, as tsc infers them from index.js and testing.js, must fit
// the declarations. test/types.test.js compiles this beside copies of the code.

import * as declared from 'larder-sqlite';
import * as declaredHelper from 'larder-sqlite/test';
import * as code from './impl/index.js';
import * as codeHelper from './impl/testing.js';

export const client: typeof declared = code;

// Inference cannot see these; types.test.js checks them at run time instead.
type Unseen = 'RUN_VARIABLES' | 'test' | 'it' | 'describe' | 'SnapshotCheckError';
export const helper: Omit<typeof declaredHelper, Unseen> = codeHelper;
export const snapshotError: new (result: declared.CheckResult) => Omit<declaredHelper.SnapshotCheckError, 'result'> =
  codeHelper.SnapshotCheckError;
export const runners: Array<(...args: any[]) => unknown> = [codeHelper.test, codeHelper.it, codeHelper.describe];
export const runVariables: ReadonlyArray<readonly string[]> = codeHelper.RUN_VARIABLES;
