// The client's defaults are the ones every client shares: clients/defaults.json.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import * as client from 'larder-sqlite';
import * as helper from 'larder-sqlite/test';

// Each entry of the table as this client has it.
const constants = {
  default_url: client.DEFAULT_URL,
  request_timeout_ms: client.DEFAULT_REQUEST_TIMEOUT_MS,
  wait_timeout_ms: client.SERVER_WAIT_DEFAULT_MS,
  build_timeout_ms: client.BUILD_TIMEOUT_DEFAULT_MS,
  build_poll_ms: client.BUILD_POLL_MS,
  download_timeout_ms: client.DEFAULT_DOWNLOAD_TIMEOUT_MS,
  finish_attempts: client.BUILD_FINISH_ATTEMPTS,
  retry_after_default_ms: client.RETRY_AFTER_DEFAULT_MS,
  retry_after_max_ms: client.RETRY_AFTER_MAX_MS,
  artifacts_dir: helper.DEFAULT_ARTIFACTS_DIR,
  artifact_name_max_chars: helper.ARTIFACT_NAME_MAX,
  run_variables: helper.RUN_VARIABLES,
  label_max_bytes: helper.LABEL_MAX_BYTES,
};

test('the constants are the shared defaults of clients/defaults.json', () => {
  const entries = JSON.parse(readFileSync(new URL('../../defaults.json', import.meta.url), 'utf8'));
  const table = Object.fromEntries(
    Object.entries(entries).filter(([name]) => !name.startsWith('_')).map(([name, entry]) => [name, entry.value])
  );
  assert.deepEqual(Object.keys(constants).sort(), Object.keys(table).sort(), 'an entry of clients/defaults.json has no constant here, or one too many');
  for (const [name, value] of Object.entries(table)) {
    assert.deepEqual(constants[name], value, `${name}: the client has ${JSON.stringify(constants[name])}, clients/defaults.json ${JSON.stringify(value)}`);
  }
});
