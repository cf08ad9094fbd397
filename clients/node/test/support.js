// Starts the real Larder server for a test file: LARDER_BINARY, the
// repository's fixtures/, a fresh root, port 0.

import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, openSync, closeSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const fixturesDir = join(repoRoot, 'fixtures');

/** Tests/support/hidden-larder: runs the server where this process cannot see its files (remote mode's tests). */
export const hiddenLarder = join(repoRoot, 'Tests', 'support', 'hidden-larder');

/**
 * `hidden`: run it through Tests/support/hidden-larder, whose tmpfs over the root's parent (`work`)
 * hides every store file from this process; HTTP works as ever.
 */
export async function startServer(extraArgs = [], { hidden = false } = {}) {
  const binary = process.env.LARDER_BINARY;
  if (!binary) throw new Error('set LARDER_BINARY to the larder binary (test.sh BINARY does)');
  const work = mkdtempSync(join(tmpdir(), 'larder-node-'));
  const root = join(work, 'root'); // must not exist yet
  const stderrPath = join(work, 'server.stderr');
  const errFd = openSync(stderrPath, 'w');
  const args = ['serve', '--port', '0', '--root', root, '--fixtures', fixturesDir, ...extraArgs];
  const child = hidden
    ? spawn(hiddenLarder, args, { stdio: ['ignore', 'pipe', errFd], env: { ...process.env, LARDER_HIDDEN_BINARY: binary } })
    : spawn(binary, args, { stdio: ['ignore', 'pipe', errFd] });
  closeSync(errFd);

  const url = await new Promise((resolvePromise, reject) => {
    let buffer = '';
    const timer = setTimeout(() => fail(new Error('no "listening" line within 20 s')), 20_000);
    const fail = (err) => {
      clearTimeout(timer);
      let log = '';
      try { log = readFileSync(stderrPath, 'utf8'); } catch {}
      reject(new Error(`${err.message}\nserver stderr:\n${log}`));
    };
    const onData = (chunk) => {
      buffer += chunk;
      const nl = buffer.indexOf('\n');
      if (nl < 0) return;
      const line = buffer.slice(0, nl).trim();
      const m = /^larder listening on (http:\/\/\S+)$/.exec(line);
      clearTimeout(timer);
      child.off('exit', onExit);
      child.stdout.off('data', onData);
      child.stdout.resume(); // keep reading, so the pipe never fills
      if (m) resolvePromise(m[1]);
      else fail(new Error(`unexpected first line: ${line}`));
    };
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', onData);
    child.once('error', fail);
    const onExit = (code, signal) => fail(new Error(`server exited (${code ?? signal}) before listening`));
    child.once('exit', onExit);
  });

  return {
    url,
    work,
    stderrPath,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(work, { recursive: true, force: true });
    },
  };
}

/** The member names of a zip, read (and CRC-checked) by Python's zipfile. */
export function zipNames(file) {
  const out = execFileSync(
    'python3',
    ['-c', 'import json,sys,zipfile\nz=zipfile.ZipFile(sys.argv[1])\nbad=z.testzip()\nassert bad is None, bad\nprint(json.dumps(z.namelist()))', file],
    { encoding: 'utf8' }
  );
  return JSON.parse(out);
}
