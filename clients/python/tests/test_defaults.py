"""The client's defaults are the ones every client shares: clients/defaults.json."""
import json
import os

from larder import _client, pytest_plugin

TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "defaults.json")

# Each entry of the table as this client has it (times in the table's milliseconds).
CONSTANTS = {
    "default_url": _client.DEFAULT_URL,
    "request_timeout_ms": _client.DEFAULT_TIMEOUT * 1000,
    "wait_timeout_ms": _client.WAIT_TIMEOUT_MS,
    "build_timeout_ms": _client.BUILD_TIMEOUT_MS,
    "build_poll_ms": _client.BUILD_POLL_MS,
    "download_timeout_ms": _client.DOWNLOAD_TIMEOUT * 1000,
    "finish_attempts": _client.FINISH_ATTEMPTS,
    "retry_after_default_ms": _client.RETRY_AFTER_DEFAULT * 1000,
    "retry_after_max_ms": _client.RETRY_AFTER_MAX * 1000,
    "artifacts_dir": pytest_plugin.ARTIFACTS_DIR,
    "artifact_name_max_chars": pytest_plugin.ARTIFACT_NAME_MAX,
    "run_variables": [list(pair) for pair in _client.RUN_VARIABLES],
    "label_max_bytes": _client.LABEL_MAX_BYTES,
}


def test_the_constants_are_the_shared_defaults():
    with open(TABLE, encoding="utf-8") as f:
        table = {name: entry["value"] for name, entry in json.load(f).items() if not name.startswith("_")}
    assert sorted(CONSTANTS) == sorted(table), "an entry of clients/defaults.json has no constant here, or one too many"
    for name, value in table.items():
        assert CONSTANTS[name] == value, "%s: the client has %r, clients/defaults.json %r" % (name, CONSTANTS[name], value)
