// The npm package: package.sh packs the client with a server folder (the
// real one of scripts/portable when LARDER_PORTABLE names it, else a stand-in
// holding a copy of LARDER_BINARY), the tarball installs offline into a
// project, and a test there gets its store from the packaged binary, with
// neither LARDER_BINARY nor a larder on PATH.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { repoRoot } from './support.js';
import { clientDir, jsonLines, makeProject, pathWithoutLarder, runNode, runsFolder, sampleEnv, waitGone } from './project.js';

const platform = `${process.platform}-${process.arch}`;
const version = readFileSync(join(repoRoot, 'VERSION'), 'utf8').trim();

const SAMPLE = `
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { withStore, defaultLarder } from 'larder-sqlite/test';

test('a store from the packaged server', async (t) => {
  const store = await withStore(t, { template: 'gallery', fixtures: ['artists', 'artworks'] });
  assert.equal(store.info.counts.artworks, 12);
  const folder = join(process.env.TMPDIR, 'larder-' + process.getuid());
  const servers = readdirSync(folder)
    .filter((key) => existsSync(join(folder, key, 'server.json')))
    .map((key) => ({ key, ...JSON.parse(readFileSync(join(folder, key, 'server.json'), 'utf8')) }));
  const exe = servers.map((s) => readlinkSync('/proc/' + s.pid + '/exe'));
  appendFileSync(process.env.SAMPLE_LOG, JSON.stringify({ url: (await defaultLarder()).url, servers, exe }) + '\\n');
});
`;

let work;

before(() => {
  work = mkdtempSync(join(tmpdir(), 'larder-node-package-'));
});

after(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

// What package.sh packs: LARDER_PORTABLE, or a folder shaped like it.
function portableFolder() {
  if (process.env.LARDER_PORTABLE) return { dir: process.env.LARDER_PORTABLE, args: [] };
  const dir = join(work, 'portable');
  mkdirSync(join(dir, 'lib'), { recursive: true });
  copyFileSync(process.env.LARDER_BINARY, join(dir, 'larder'));
  execFileSync('chmod', ['0755', join(dir, 'larder')]);
  writeFileSync(join(dir, 'lib', 'README'), 'the libraries scripts/portable puts here\n');
  mkdirSync(join(dir, 'licenses'));
  writeFileSync(join(dir, 'licenses', 'SOURCES'), 'the licences of those libraries\n');
  return { dir, args: [platform] };
}

test('package.sh makes a tarball that installs offline and starts its own server', { skip: process.platform !== 'linux' && 'the packaged server is Linux only' }, async (t) => {
  const portable = portableFolder();
  const dist = join(work, 'dist');
  const said = execFileSync('bash', [join(clientDir, 'package.sh'), portable.dir, dist, ...portable.args], { encoding: 'utf8' });
  const tarball = join(dist, `larder-sqlite-${version}.tgz`);
  assert.ok(existsSync(tarball), said);
  t.diagnostic(said.trim());

  // What it holds: the client, the licence, the server; nothing else of this folder.
  const listing = execFileSync('tar', ['tzvf', tarball], { encoding: 'utf8' });
  const names = listing.trim().split('\n').map((line) => line.split(/\s+/).pop());
  for (const file of ['index.js', 'index.d.ts', 'testing.js', 'testing.d.ts', 'package.json', 'README.md', 'LICENSE', 'NOTICE']) {
    assert.ok(names.includes(`package/${file}`), `${file} in\n${listing}`);
  }
  assert.match(listing, new RegExp(`^-rwxr-xr-x .* package/server/${platform}/larder$`, 'm'), 'the binary, executable');
  assert.ok(names.some((n) => n.startsWith(`package/server/${platform}/lib/`)), `lib/ in\n${listing}`);
  assert.deepEqual(names.filter((n) => /^package\/(test|node_modules)\/|package\.sh$/.test(n)), [], 'no tests, no script');

  const manifest = JSON.parse(execFileSync('tar', ['xzf', tarball, '-O', 'package/package.json'], { encoding: 'utf8' }));
  assert.equal(manifest.name, 'larder-sqlite');
  assert.equal(manifest.version, version);
  assert.equal(manifest.license, 'Apache-2.0');
  assert.equal(manifest.private, undefined);
  assert.equal(manifest.os, undefined, 'installs anywhere: the binary is picked at run time');
  assert.equal(manifest.cpu, undefined);
  assert.equal(manifest.repository.directory, 'clients/node');
  const readme = execFileSync('tar', ['xzf', tarball, '-O', 'package/README.md'], { encoding: 'utf8' });
  assert.doesNotMatch(readme, /\]\(\.\.\//, 'links into the repository point at GitHub');
  assert.equal(
    execFileSync('tar', ['xzf', tarball, '-O', 'package/LICENSE'], { encoding: 'utf8' }),
    readFileSync(join(repoRoot, 'LICENSE'), 'utf8')
  );

  // Installed offline into a project of its own.
  const project = makeProject(join(work, 'project'), { link: false, files: { 'store.test.mjs': SAMPLE } });
  execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--cache', join(work, 'npm-cache'), tarball], {
    cwd: project,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const binary = join(project, 'node_modules', 'larder-sqlite', 'server', platform, 'larder');
  assert.ok(existsSync(binary), binary);
  assert.equal(statSync(binary).mode & 0o777, 0o755, 'the executable bit survives the install');

  // A test there, with no URL, no LARDER_BINARY and no larder on PATH.
  const tmp = join(work, 'tmp');
  mkdirSync(tmp);
  const log = join(project, 'log.jsonl');
  const env = sampleEnv({ TMPDIR: tmp, PATH: pathWithoutLarder(join(work, 'bin')), SAMPLE_LOG: log });
  const run = await runNode(project, ['--test', '--test-reporter=tap', 'store.test.mjs'], env);
  assert.equal(run.code, 0, run.output);
  assert.match(run.stdout, /^# pass 1$/m, run.output);
  const [entry] = jsonLines(log);
  assert.equal(entry.servers.length, 1, run.output);
  assert.equal(entry.url, entry.servers[0].url);
  assert.deepEqual(entry.exe, [realpathSync(binary)], 'the packaged binary serves');
  await waitGone({ url: entry.url, pid: entry.servers[0].pid, folder: join(runsFolder(tmp), entry.servers[0].key) }, 5_000);
});
