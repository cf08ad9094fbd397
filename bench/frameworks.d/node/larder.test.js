// bench/frameworks, larder: withStore's store, a row written to its path.
import { test } from 'node:test';
import { withStore } from 'larder-sqlite/test';
import { TESTS, name, write } from './write.js';

for (let i = 1; i <= TESTS; i++) {
  test(name(i), async (t) => {
    const store = await withStore(t, { template: 'gallery', fixtures: ['artists', 'artworks'] });
    await write(store.path);
  });
}
