// The hand-written typings (index.d.ts, testing.d.ts) checked against the code and the
// server's /openapi.json, with tsc and its API from Debian's node-typescript.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  accessSync, constants, copyFileSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import * as client from 'larder-sqlite';
import * as helper from 'larder-sqlite/test';
import { startServer } from './support.js';

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..');
const fixtures = join(pkg, 'test', 'types');
const declarations = { client: join(pkg, 'index.d.ts'), helper: join(pkg, 'testing.d.ts') };

function findTsc() {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    try {
      accessSync(join(dir, 'tsc'), constants.X_OK);
      return realpathSync(join(dir, 'tsc'));
    } catch {}
  }
  throw new Error("tsc is not on PATH: install Debian's node-typescript (apt-get install node-typescript; scripts/setup does)");
}

const tsc = findTsc();
const ts = createRequire(tsc)('../lib/typescript.js');

function compile(project) {
  const run = spawnSync(tsc, ['-p', project, '--pretty', 'false'], { encoding: 'utf8' });
  assert.equal(run.status, 0, `tsc -p ${project}:\n${run.stdout}${run.stderr}`);
}

function scratch(t) {
  const dir = mkdtempSync(join(tmpdir(), 'larder-types-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function writeConfig(dir, compilerOptions, files) {
  const base = { strict: true, noEmit: true, target: 'es2022', lib: ['es2022'], module: 'es2022', moduleResolution: 'node', types: [] };
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { ...base, ...compilerOptions }, files }));
  return join(dir, 'tsconfig.json');
}

// The declarations, read through tsc's API.
const program = ts.createProgram([join(fixtures, 'node.d.ts'), declarations.client, declarations.helper], {
  strict: true,
  noEmit: true,
  types: [],
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.ES2022,
  moduleResolution: ts.ModuleResolutionKind.NodeJs,
});
const checker = program.getTypeChecker();

function resolved(symbol) {
  return symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
}

function exportsOf(file) {
  const symbols = checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(file)));
  return new Map(symbols.filter((s) => resolved(s).flags & ts.SymbolFlags.Value).map((s) => [s.name, resolved(s)]));
}

function declaredType(file, name) {
  const symbol = checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(file))).find((s) => s.name === name);
  assert.ok(symbol, `${file} declares no ${name}`);
  return checker.getDeclaredTypeOfSymbol(resolved(symbol));
}

// The property names of a type, less those the standard library declares (Error's).
function propertyNames(type) {
  return checker
    .getPropertiesOfType(checker.getNonNullableType(type))
    .filter((p) => !(p.declarations ?? []).some((d) => program.isSourceFileDefaultLibrary(d.getSourceFile())))
    .map((p) => p.name)
    .sort();
}

const sorted = (names) => [...new Set(names)].sort();

test('the typings and a caller of every export compile (tsc --strict, through the exports map)', () => {
  compile(join(fixtures, 'tsconfig.json'));
});

test('the typings compile for moduleResolution node (through typesVersions)', (t) => {
  const dir = scratch(t);
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(pkg, join(dir, 'node_modules', 'larder-sqlite'));
  for (const file of ['node.d.ts', 'usage.ts']) copyFileSync(join(fixtures, file), join(dir, file));
  compile(writeConfig(dir, {}, ['node.d.ts', 'usage.ts']));
});

test("the code's inferred types fit the declarations (tsc --allowJs)", (t) => {
  const dir = scratch(t);
  mkdirSync(join(dir, 'impl'));
  for (const file of ['index.js', 'testing.js']) copyFileSync(join(pkg, file), join(dir, 'impl', file));
  for (const file of ['node.d.ts', 'conformance.ts']) copyFileSync(join(fixtures, file), join(dir, file));
  const paths = { 'larder-sqlite': [declarations.client], 'larder-sqlite/test': [declarations.helper] };
  compile(writeConfig(dir, { allowJs: true, paths }, ['node.d.ts', 'conformance.ts']));
});

test('every export of index.js and testing.js is declared, and every declared value exported', () => {
  assert.deepEqual([...exportsOf(declarations.client).keys()].sort(), Object.keys(client).sort(), 'index.js against index.d.ts');
  assert.deepEqual([...exportsOf(declarations.helper).keys()].sort(), Object.keys(helper).sort(), 'testing.js against testing.d.ts');
});

// Public members the typings leave out on purpose: plumbing between Larder and Store.
const INTERNAL = { Larder: ['fetch'], Store: ['base'] };
const CONSTRUCTED = {
  Larder: () => new client.Larder({ url: 'http://127.0.0.1:9' }),
  Store: () => new client.Store(null, { id: 'st_1', path: '/nowhere' }),
  SnapshotCheckError: () => new helper.SnapshotCheckError({ failures: [] }),
};

function runtimeMembers(instance) {
  const names = Object.getOwnPropertyNames(instance);
  let proto = Object.getPrototypeOf(instance);
  for (; proto !== Error.prototype && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
    names.push(...Object.getOwnPropertyNames(proto).filter((n) => n !== 'constructor'));
  }
  return sorted(instance instanceof Error ? names.filter((n) => !['name', 'message', 'stack', 'cause'].includes(n)) : names);
}

test('the classes and functions have the members the typings declare', () => {
  for (const [file, code] of [[declarations.client, client], [declarations.helper, helper]]) {
    for (const [name, symbol] of exportsOf(file)) {
      const value = code[name];
      const at = `${name} of ${file}`;
      if (symbol.flags & ts.SymbolFlags.Class) {
        const instance = (CONSTRUCTED[symbol.name] ?? (() => new value('a message')))();
        const declared = propertyNames(checker.getDeclaredTypeOfSymbol(symbol));
        assert.deepEqual(declared, runtimeMembers(instance).filter((n) => !INTERNAL[symbol.name]?.includes(n)), at);
      } else if (typeof value === 'function') {
        const declared = propertyNames(checker.getTypeOfSymbolAtLocation(symbol, symbol.valueDeclaration));
        assert.deepEqual(declared, Object.keys(value).sort(), at);
      }
    }
  }
});

// The parameters index.js and testing.js destructure, as `Class.method` or `function`.
function destructured(file) {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true, ts.ScriptKind.JS);
  const found = new Map();
  const record = (name, node) => {
    found.set(
      name,
      node.parameters.map((p) =>
        ts.isObjectBindingPattern(p.name) && !p.name.elements.some((e) => e.dotDotDotToken)
          ? sorted(p.name.elements.map((e) => (e.propertyName ?? e.name).getText(source)))
          : null
      )
    );
  };
  for (const statement of source.statements) {
    if (ts.isFunctionDeclaration(statement) && statement.name) record(statement.name.text, statement);
    if (ts.isClassDeclaration(statement) && statement.name) {
      for (const member of statement.members) {
        if (ts.isConstructorDeclaration(member)) record(`${statement.name.text}.constructor`, member);
        if (ts.isMethodDeclaration(member)) record(`${statement.name.text}.${member.name.getText(source)}`, member);
      }
    }
  }
  return found;
}

// The declared signatures, keyed as destructured() keys the code's.
function declaredSignatures(file) {
  const found = new Map();
  for (const [name, symbol] of exportsOf(file)) {
    if (symbol.flags & ts.SymbolFlags.Class) {
      const instance = checker.getDeclaredTypeOfSymbol(symbol);
      const statics = checker.getTypeOfSymbolAtLocation(symbol, symbol.valueDeclaration);
      found.set(`${symbol.name}.constructor`, statics.getConstructSignatures());
      for (const member of checker.getPropertiesOfType(instance)) {
        const type = checker.getTypeOfSymbolAtLocation(member, symbol.valueDeclaration);
        found.set(`${symbol.name}.${member.name}`, type.getCallSignatures());
      }
    } else if (symbol.flags & ts.SymbolFlags.Function) {
      found.set(name, checker.getTypeOfSymbolAtLocation(symbol, symbol.valueDeclaration).getCallSignatures());
    }
  }
  return found;
}

function parameterNames(signatures, index) {
  const names = signatures.flatMap((s) => {
    const parameter = s.getParameters()[index];
    return parameter ? propertyNames(checker.getTypeOfSymbolAtLocation(parameter, parameter.valueDeclaration)) : [];
  });
  return sorted(names);
}

test('each options object the code destructures has the properties the typings declare', () => {
  const pairs = [];
  for (const [js, dts] of [['index.js', declarations.client], ['testing.js', declarations.helper]]) {
    const declared = declaredSignatures(dts);
    for (const [name, params] of destructured(join(pkg, js))) {
      params.forEach((names, i) => {
        if (names && declared.has(name)) pairs.push([`${name} parameter ${i + 1}`, parameterNames(declared.get(name), i), names]);
      });
    }
  }
  // request() and exchange() hand their options to fetch(), which the typings leave out.
  const fetchOptions = destructured(join(pkg, 'index.js')).get('Larder.fetch')[2];
  pairs.push(['Larder.request options', parameterNames(declaredSignatures(declarations.client).get('Larder.request'), 2), fetchOptions]);
  assert.ok(pairs.length >= 10, `only ${pairs.length} destructured options found`);
  for (const [what, declared, code] of pairs) assert.deepEqual(declared, code, what);
});

// The options a call lists in its TypeError for an unknown one.
async function known(call) {
  try {
    await call({ unknownOption: 1 });
  } catch (err) {
    const listed = /unknown option 'unknownOption'; known: (.*)$/.exec(err.message);
    if (listed) return sorted(listed[1].split(', '));
    throw err;
  }
  assert.fail('an unknown option was taken');
}

// Whether a call refuses `key` as one that each snapshot has of its own.
async function refusedPerSnapshot(call, key) {
  try {
    await call({ migrate: () => {}, [key]: 'x' });
  } catch (err) {
    if (/is per snapshot/.test(err.message)) return true;
  }
  return false;
}

test('each options object the code checks by name has the properties the typings declare', async () => {
  const larder = new client.Larder({ url: 'http://127.0.0.1:9' });
  const store = new client.Store(larder, { id: 'st_1', path: '/nowhere' });
  const options = (name, file = declarations.client) => propertyNames(declaredType(file, name));
  const uploadOptions = parameterNames(declaredSignatures(declarations.client).get('Larder.upload'), 1);

  assert.deepEqual(options('CreateStoreOptions'), await known((o) => larder.createStore(o)), 'createStore');
  assert.deepEqual(uploadOptions, await known((o) => larder.upload(new Uint8Array(0), o)), 'upload');
  assert.deepEqual(options('LoadOptions'), await known((o) => store.load(o)), 'Store.load');
  assert.deepEqual(options('CheckOptions'), await known((o) => larder.check('st_1', { build: 'key' }, o)), 'check');
  const snapshotOptions = await known((o) => larder.checkSnapshot('v1.sqlite', o));
  assert.deepEqual(options('CheckSnapshotOptions'), snapshotOptions, 'checkSnapshot');
  assert.deepEqual(options('HelperSettings', declarations.helper), await known((o) => helper.configure(o)), 'configure');

  const nowhere = join(tmpdir(), 'larder-no-such-dir');
  const taken = async (call) => {
    const keys = [];
    for (const key of snapshotOptions) if (!(await refusedPerSnapshot(call, key))) keys.push(key);
    return keys;
  };
  assert.deepEqual(options('CheckSnapshotsOptions'), await taken((o) => larder.checkSnapshots(nowhere, o)), 'checkSnapshots');
  const testSnapshotsOptions = options('TestSnapshotsOptions', declarations.helper);
  assert.deepEqual(
    testSnapshotsOptions.filter((k) => k !== 'larder'),
    await taken((o) => helper.testSnapshots(nowhere, o)),
    'testSnapshots'
  );

  // withStore takes createStore's options, plus its own, which it keeps to itself.
  let given;
  const fake = { createStore: async (o) => ((given = o), new client.Store(larder, { id: 'st_1', path: '/nowhere' })) };
  const context = { name: 'a test', passed: true, after() {}, test() {}, diagnostic() {} };
  const withStoreOptions = options('WithStoreOptions', declarations.helper);
  await helper.withStore(context, Object.fromEntries(withStoreOptions.map((k) => [k, k === 'larder' ? fake : 'x'])));
  assert.deepEqual(
    withStoreOptions.filter((k) => !(k in given)),
    withStoreOptions.filter((k) => !options('CreateStoreOptions').includes(k)),
    'withStore'
  );
  assert.ok(testSnapshotsOptions.includes('larder') && withStoreOptions.includes('larder'));
});

// Where the server's answer is a declared type: [what, the type, its schema in /openapi.json].
function answers() {
  const signatures = declaredSignatures(declarations.client);
  const returned = (key) => checker.getAwaitedType(signatures.get(key)[0].getReturnType());
  const named = [
    ['StoreInfo', 'Store'],
    ['BuildInfo', 'Build'],
    ['CheckResult', 'CheckResult'],
    ['QueryResult', 'QueryResult'],
    ['LoadResult', 'Loaded'],
    ['MigrateResult', 'Migrated'],
    ['Diff', 'Diff'],
  ];
  return [
    ...named.map(([name, schema]) => [name, declaredType(declarations.client, name), schema]),
    ['Larder.health()', returned('Larder.health'), 'Health'],
    ['Larder.templates()', returned('Larder.templates'), 'TemplateList/templates'],
    ['Store.schema()', returned('Store.schema'), 'Schema'],
  ];
}

// How `type` differs from the JSON Schema `schema`: property names, which are required, null,
// enums, elements and values, and string, number or boolean. Loose types (unknown, a record with
// no named properties) are not compared further.
function differences(type, schema, at, resolve, out = []) {
  schema = resolve(schema);
  if (!schema || schema.oneOf || schema.anyOf || type.flags & (ts.TypeFlags.Any | ts.TypeFlags.Unknown)) return out;
  const kinds = [].concat(schema.type ?? []);
  const members = type.isUnion() ? type.types : [type];
  if (kinds.length && members.some((m) => m.flags & ts.TypeFlags.Null) !== kinds.includes('null')) {
    out.push(`${at}: the server says ${kinds.join(' or ')}, declared ${checker.typeToString(type)}`);
  }
  const bare = checker.getNonNullableType(type);
  const kind = kinds.find((k) => k !== 'null');
  if (schema.enum) {
    const literals = (bare.isUnion() ? bare.types : [bare]).filter((m) => m.isStringLiteral()).map((m) => m.value);
    if (literals.length && sorted(literals).join() !== sorted(schema.enum).join()) {
      out.push(`${at}: the server says one of ${sorted(schema.enum).join(', ')}, declared ${checker.typeToString(bare)}`);
    }
  } else if (kind === 'array') {
    const element = checker.isArrayType(bare) && checker.getIndexTypeOfType(bare, ts.IndexKind.Number);
    if (!element) out.push(`${at}: the server says an array, declared ${checker.typeToString(bare)}`);
    else differences(element, schema.items, `${at}[]`, resolve, out);
  } else if (kind === 'object') {
    const properties = checker.getPropertiesOfType(bare);
    if (schema.properties && properties.length) {
      const declared = sorted(properties.map((p) => p.name));
      const required = sorted(properties.filter((p) => !(p.flags & ts.SymbolFlags.Optional)).map((p) => p.name));
      const names = sorted(Object.keys(schema.properties));
      if (declared.join() !== names.join()) out.push(`${at}: the server's properties are ${names.join(', ')}; declared ${declared.join(', ')}`);
      if (required.join() !== sorted(schema.required ?? []).join()) {
        out.push(`${at}: the server always gives ${sorted(schema.required ?? []).join(', ')}; declared required ${required.join(', ')}`);
      }
      for (const p of properties.filter((p) => schema.properties[p.name])) {
        const propertyType = checker.getTypeOfSymbolAtLocation(p, p.valueDeclaration);
        differences(propertyType, schema.properties[p.name], `${at}.${p.name}`, resolve, out);
      }
    }
    const values = checker.getIndexTypeOfType(bare, ts.IndexKind.String);
    if (values && typeof schema.additionalProperties === 'object') differences(values, schema.additionalProperties, `${at}[*]`, resolve, out);
  } else if (kind) {
    const { StringLike, NumberLike, BooleanLike } = ts.TypeFlags;
    const flag = { string: StringLike, number: NumberLike, integer: NumberLike, boolean: BooleanLike }[kind];
    if (flag && !(bare.isUnion() ? bare.types : [bare]).every((m) => m.flags & flag)) {
      out.push(`${at}: the server says ${kind}, declared ${checker.typeToString(bare)}`);
    }
  }
  return out;
}

test("the answers' types are the server's (its /openapi.json)", async (t) => {
  const server = await startServer();
  t.after(() => server.stop());
  const spec = await (await fetch(`${server.url}/openapi.json`)).json();
  const resolve = (schema) => {
    while (schema?.$ref) schema = schema.$ref.split('/').slice(1).reduce((node, key) => node[key], spec);
    return schema;
  };
  const found = [];
  for (const [what, type, name] of answers()) {
    const [schema, property] = name.split('/');
    const node = spec.components.schemas[schema];
    assert.ok(node, `/openapi.json has no schema ${schema}`);
    differences(type, property ? node.properties[property] : node, what, resolve, found);
  }
  assert.deepEqual(found, []);
});
