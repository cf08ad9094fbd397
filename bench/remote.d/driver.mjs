// bench/remote's Node driver: ITERATIONS tests of one SCENARIO against the server at URL with
// clients/node (`new Larder({url})`, its mode from LARDER_MODE), after WARMUP tests not counted;
// prints one JSON object.
//
//   node driver.mjs SCENARIO URL ITERATIONS WARMUP TEMPLATE FIXTURES ARTIFACTS
//
// As driver.py, with the row written by the sqlite3 command-line tool (execFileSync: the Node
// client has no SQLite of its own), whose process start is most of "write".
import { execFileSync } from 'node:child_process';
import { statSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Larder } from '../../clients/node/index.js';

const ROW = "INSERT INTO albums (title) VALUES ('Summer')";

function write(path) {
  execFileSync('sqlite3', [path, ROW], { stdio: ['ignore', 'ignore', 'inherit'] });
}

async function one(client, scenario, template, fixtures, artifacts, n) {
  const remote = scenario.startsWith('remote');
  const failing = scenario.endsWith('fail');
  const steps = {};
  const facts = {};
  const began = performance.now();
  let last = began;
  const step = (name) => {
    const now = performance.now();
    steps[name] = now - last;
    last = now;
  };

  const options = { template };
  if (fixtures) options.fixtures = fixtures;
  const store = await client.createStore(options);
  step('create');
  const path = store.path;
  write(path);
  step('write');
  if (store.remote !== remote || (path === store.info.path) === remote) {
    throw new Error(`${scenario}: the store is remote=${store.remote}, path ${path}, the server's ${store.info.path}`);
  }
  if (!failing) {
    await store.delete();
    step('delete');
    steps.total = last - began;
    return { steps, facts };
  }
  if (remote) {
    await store.checkIn();
    step('checkin');
  }
  await store.keep();
  step('keep');
  const artifact = await store.artifact(join(artifacts, `node-${scenario}-${n}-${store.id}.zip`));
  step('artifact');
  await store.close();
  step('close');
  steps.total = last - began;
  facts.albums = store.info.counts?.albums ?? null;
  facts.artifact_bytes = statSync(artifact).size;
  facts.size_bytes = store.info.size_bytes ?? null;
  unlinkSync(artifact);
  last = performance.now();
  await store.delete();
  step('delete');
  return { steps, facts };
}

const [scenario, url, iterations, warmup, template, fixtureList, artifacts] = process.argv.slice(2);
const fixtures = fixtureList === '-' ? null : fixtureList.split(',');
const client = new Larder({ url });
const sqlite = execFileSync('sqlite3', ['--version'], { encoding: 'utf8' }).split(' ')[0];
const out = { client: 'node', scenario, mode: client.mode, iterations: [], facts: [], writer: `sqlite3 ${sqlite} (a process per write)` };
for (let n = 0; n < Number(warmup) + Number(iterations); n++) {
  const { steps, facts } = await one(client, scenario, template, fixtures, artifacts, n);
  if (n >= Number(warmup)) {
    out.iterations.push(steps);
    out.facts.push(facts);
  }
}
console.log(JSON.stringify(out));
