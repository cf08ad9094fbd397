// bench/frameworks, naive: the template file copied into a temporary folder of the test's (removed
// after it), a row written to the copy.
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import 'larder-sqlite/test'; // imported alike by every suite
import { TEMPLATE, TESTS, name, write } from './write.js';

for (let i = 1; i <= TESTS; i++) {
  test(name(i), async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'bench-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'store.sqlite');
    copyFileSync(TEMPLATE, path);
    await write(path);
  });
}
