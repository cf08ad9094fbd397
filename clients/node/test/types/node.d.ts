// The part of @types/node that the typings use, shaped as @types/node 20 declares it:
// Debian packages no @types/node, and the check must run offline.

declare module 'node:test' {
  function test(name?: string, fn?: TestFn): Promise<void>;
  function test(name?: string, options?: TestOptions, fn?: TestFn): Promise<void>;
  function test(options?: TestOptions, fn?: TestFn): Promise<void>;
  function test(fn?: TestFn): Promise<void>;
  namespace test {
    export { after, afterEach, before, beforeEach, describe, it, mock, only, run, skip, suite, test, todo };
  }
  function suite(name?: string, options?: TestOptions, fn?: SuiteFn): Promise<void>;
  function suite(name?: string, fn?: SuiteFn): Promise<void>;
  function suite(options?: TestOptions, fn?: SuiteFn): Promise<void>;
  function suite(fn?: SuiteFn): Promise<void>;
  function describe(name?: string, options?: TestOptions, fn?: SuiteFn): Promise<void>;
  function describe(name?: string, fn?: SuiteFn): Promise<void>;
  function describe(options?: TestOptions, fn?: SuiteFn): Promise<void>;
  function describe(fn?: SuiteFn): Promise<void>;
  namespace describe {
    function skip(name?: string, options?: TestOptions, fn?: SuiteFn): Promise<void>;
    function skip(name?: string, fn?: SuiteFn): Promise<void>;
    function todo(name?: string, options?: TestOptions, fn?: SuiteFn): Promise<void>;
    function todo(name?: string, fn?: SuiteFn): Promise<void>;
    function only(name?: string, options?: TestOptions, fn?: SuiteFn): Promise<void>;
    function only(name?: string, fn?: SuiteFn): Promise<void>;
  }
  function it(name?: string, options?: TestOptions, fn?: TestFn): Promise<void>;
  function it(name?: string, fn?: TestFn): Promise<void>;
  function it(options?: TestOptions, fn?: TestFn): Promise<void>;
  function it(fn?: TestFn): Promise<void>;
  namespace it {
    function skip(name?: string, options?: TestOptions, fn?: TestFn): Promise<void>;
    function skip(name?: string, fn?: TestFn): Promise<void>;
    function todo(name?: string, options?: TestOptions, fn?: TestFn): Promise<void>;
    function todo(name?: string, fn?: TestFn): Promise<void>;
    function only(name?: string, options?: TestOptions, fn?: TestFn): Promise<void>;
    function only(name?: string, fn?: TestFn): Promise<void>;
  }
  function skip(name?: string, options?: TestOptions, fn?: TestFn): Promise<void>;
  function skip(name?: string, fn?: TestFn): Promise<void>;
  function todo(name?: string, options?: TestOptions, fn?: TestFn): Promise<void>;
  function todo(name?: string, fn?: TestFn): Promise<void>;
  function only(name?: string, options?: TestOptions, fn?: TestFn): Promise<void>;
  function only(name?: string, fn?: TestFn): Promise<void>;
  function run(options?: { files?: readonly string[] }): unknown;
  function before(fn?: HookFn, options?: HookOptions): void;
  function after(fn?: HookFn, options?: HookOptions): void;
  function beforeEach(fn?: HookFn, options?: HookOptions): void;
  function afterEach(fn?: HookFn, options?: HookOptions): void;
  type TestFn = (t: TestContext, done: (result?: any) => void) => void | Promise<void>;
  type SuiteFn = (s: SuiteContext) => void | Promise<void>;
  type HookFn = (c: TestContext | SuiteContext, done: (result?: any) => void) => any;
  interface HookOptions {
    signal?: AbortSignal | undefined;
    timeout?: number | undefined;
  }
  interface TestOptions {
    concurrency?: number | boolean | undefined;
    only?: boolean | undefined;
    signal?: AbortSignal | undefined;
    skip?: boolean | string | undefined;
    timeout?: number | undefined;
    todo?: boolean | string | undefined;
    plan?: number | undefined;
  }
  class MockTracker {
    fn(original?: Function): Function;
    reset(): void;
  }
  const mock: MockTracker;
  class TestContext {
    before: typeof before;
    beforeEach: typeof beforeEach;
    after: typeof after;
    afterEach: typeof afterEach;
    diagnostic(message: string): void;
    readonly filePath: string | undefined;
    readonly fullName: string;
    readonly name: string;
    readonly passed: boolean;
    readonly error: unknown;
    plan(count: number): void;
    runOnly(shouldRunOnlyTests: boolean): void;
    readonly signal: AbortSignal;
    skip(message?: string): void;
    todo(message?: string): void;
    test: typeof test;
    readonly mock: MockTracker;
  }
  class SuiteContext {
    readonly name: string;
    readonly filePath: string | undefined;
    readonly signal: AbortSignal;
  }
  export {
    after,
    afterEach,
    before,
    beforeEach,
    describe,
    it,
    mock,
    only,
    run,
    skip,
    suite,
    SuiteContext,
    test,
    test as default,
    TestContext,
    todo,
  };
}

interface AbortSignal {
  readonly aborted: boolean;
}

declare class URL {
  constructor(input: string | URL, base?: string | URL);
  readonly href: string;
  toString(): string;
}
