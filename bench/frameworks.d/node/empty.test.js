// bench/frameworks, empty: the framework's own cost per test.
import { test } from 'node:test';
import 'larder-sqlite/test'; // imported alike by every suite
import { TESTS, name } from './write.js';

for (let i = 1; i <= TESTS; i++) {
  test(name(i), () => {});
}
