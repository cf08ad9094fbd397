// The test's work in bench/frameworks' Node suites: one row inserted and committed (autocommit) into
// the SQLite file at `path` with the sqlite3 package (Debian's node-sqlite3), or with the sqlite3
// command-line tool when LARDER_BENCH_WRITER=cli.
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';

const ROW = "INSERT INTO albums (title) VALUES ('Summer')";
const CLI = process.env.LARDER_BENCH_WRITER === 'cli';
const sqlite3 = CLI ? null : createRequire(import.meta.url)('sqlite3');

export const TESTS = Number(process.env.LARDER_BENCH_TESTS);
export const TEMPLATE = process.env.LARDER_BENCH_TEMPLATE;
if (!(TESTS >= 1)) throw new Error(`LARDER_BENCH_TESTS: ${process.env.LARDER_BENCH_TESTS}`);

export const name = (i) => `t${String(i).padStart(4, '0')}`;

export function write(path) {
  if (CLI) {
    execFileSync('sqlite3', [path, ROW], { stdio: ['ignore', 'ignore', 'inherit'] });
    return Promise.resolve();
  }
  return new Promise((resolve, reject) => {
    const db = new sqlite3.Database(path, (openError) => {
      if (openError) return reject(openError);
      db.run(ROW, (runError) => {
        db.close((closeError) => (runError || closeError ? reject(runError || closeError) : resolve()));
      });
    });
  });
}
