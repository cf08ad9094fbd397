// A stand-in for an application's own migrator (Alembic, say): plain SQL
// migrations run with the `sqlite3` command line shell on a database file,
// each in a transaction that also records its version in alembic_version,
// as Alembic does. The app-check tests, and the sample test file they run
// in a child `node --test`, share it.

import { execFileSync } from 'node:child_process';

/** Runs `sql` on the file at `path` with the sqlite3 shell (stops at the first error); answers its output. */
export function sqlite(path, sql) {
  return execFileSync('sqlite3', ['-bail', path], { input: sql, encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] });
}

const NOTES = 'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL, tag TEXT); CREATE INDEX notes_tag ON notes(tag);';
const PINNED = 'ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;';

/** Versions of the notes schema: 0002 replaces the tag index with a (tag, pinned) one. */
export const MIGRATIONS = {
  good: [
    { version: '0001', sql: NOTES },
    { version: '0002', sql: `${PINNED} DROP INDEX notes_tag; CREATE INDEX notes_tag_pinned ON notes(tag, pinned);` },
  ],
  // 0002 that drops a column holding data (its build, made by the same
  // migrations, has no such column either: only the data rule can tell).
  lossy: [
    { version: '0001', sql: NOTES },
    { version: '0002', sql: `${PINNED} DROP INDEX notes_tag; ALTER TABLE notes DROP COLUMN tag;` },
  ],
  // 0002 that forgets to drop the old index.
  forgetful: [
    { version: '0001', sql: NOTES },
    { version: '0002', sql: `${PINNED} CREATE INDEX notes_tag_pinned ON notes(tag, pinned);` },
  ],
};

/**
 * The migrator: brings the database at `path` from the version its
 * alembic_version names (none: empty) up to the last of `steps`.
 */
export function migrator(steps) {
  return (path) => {
    const current = sqlite(path, 'CREATE TABLE IF NOT EXISTS alembic_version (version_num TEXT NOT NULL); SELECT version_num FROM alembic_version;').trim();
    for (const { version, sql } of steps) {
      if (current && version <= current) continue;
      sqlite(path, `BEGIN; ${sql} DELETE FROM alembic_version; INSERT INTO alembic_version VALUES ('${version}'); COMMIT;`);
    }
  };
}

/** Makes the old database `path`: `steps` migrated, then `data` (SQL) inserted. */
export function makeSnapshot(path, steps, data) {
  migrator(steps)(path);
  sqlite(path, data);
}
