"""Larder's own checks and hooks for schemathesis (scripts/schemathesis
loads this file):

- positive_data_acceptance lets pass the 400s whose reason depends on state
  (below), which no OpenAPI schema can state;
- ensure_resource_availability takes a 404 as "the store is gone" only when
  its code is store_not_found (not for an unknown fixture or version);
- a before_call hook keeps waits (count waits, build waits, stores from a
  build under way) short, so a wait cannot hold a request for 30 s or more;
- before_generate hooks mix valid requests into what is generated for the
  operations whose validity no schema can state (below), so each phase
  reaches their work and not only their refusals.
"""
import json
import os

import schemathesis
from schemathesis.specs.openapi import checks as builtin

# The reasons (`details.reason`) of the 400s that depend on the store, the
# template, another parameter or what the SQL text says rather than on the
# request's own shape, which no OpenAPI schema can state; the server names
# them (LarderError.Reason), so nothing here reads English.
STATE_DEPENDENT_REASONS = {
    "no_template",           # migrations or named fixtures of a store made without a template
    "no_down_migration",     # a version below a snapshot's, on a template that cannot go down
    "unknown_table",         # /counts: `tables` or `wait` name a table the store does not have
    "label_too_long",        # 256 bytes of UTF-8 (maxLength counts 256 characters)
    "timeout_without_wait",  # /counts: `timeout_ms` needs `wait`
    "no_selector",           # DELETE /stores: `label` or `label_prefix` (OpenAPI cannot require one of two)
    "not_one_statement",     # /query: blanks or comments only, or two statements
    "params_mismatch",       # /query: `params` does not fit the statement's parameters
    "not_an_upload",         # /check: an app's check judges an uploaded store only
    "not_a_database",        # an upload or a check-in whose bytes are not a sound SQLite database (or a zip of one)
}

# Uploads and check-ins are raw bodies: sent as the bytes generated.
for media_type in ("application/vnd.sqlite3", "application/zip"):
    schemathesis.serializer.alias(media_type, "application/octet-stream")


def error_of(response):
    try:
        error = json.loads(response.content)["error"]
        return error if isinstance(error, dict) else {}
    except Exception:
        return {}


@schemathesis.check
def larder_positive_data_acceptance(ctx, response, case):
    if response.status_code == 400:
        details = error_of(response).get("details")
        if isinstance(details, dict) and details.get("reason") in STATE_DEPENDENT_REASONS:
            return True
    return builtin.positive_data_acceptance(ctx, response, case)


@schemathesis.check
def larder_ensure_resource_availability(ctx, response, case):
    if response.status_code == 404 and error_of(response).get("code") != "store_not_found":
        return True
    return builtin.ensure_resource_availability(ctx, response, case)


WAIT_CAP_MS = 250


def capped(timeout):
    """A valid `timeout_ms` lowered to the cap; anything else as it was.
    JSON Schema counts 32416.0 as an integer, and so does the server: a float
    with no fraction is capped too (it once held a request past the client's
    30 s read timeout)."""
    whole = type(timeout) is int or (type(timeout) is float and timeout.is_integer())
    if (whole or (isinstance(timeout, str) and timeout.isascii() and timeout.isdigit())) \
            and WAIT_CAP_MS < int(timeout) <= 300_000:
        return type(timeout)(WAIT_CAP_MS) if whole else str(WAIT_CAP_MS)
    return timeout


@schemathesis.hook
def before_call(context, case, kwargs):
    # Waits answer when their condition holds or when `timeout_ms` (default
    # 30 s, up to 300 s) has passed: a count wait (GET /stores/{id}/counts?wait=),
    # a build wait (GET /builds/{key}?wait=ready) and a store from a build that
    # is building (POST /stores {"build"}). Keep every wait short so the run
    # stays bounded. Only valid values are lowered, so a case stays as valid or
    # invalid as it was generated.
    path, method = case.operation.path, case.operation.method.upper()
    if path in ("/stores/{id}/counts", "/builds/{key}") and case.query and "wait" in case.query:
        timeout = case.query.get("timeout_ms")
        case.query["timeout_ms"] = WAIT_CAP_MS if timeout is None else capped(timeout)
    elif path == "/stores" and method == "POST":
        # The body as generated, and as it goes out (the stateful phase fills
        # `build` in from an earlier answer's key).
        for body in (case.body, kwargs.get("json")):
            if isinstance(body, dict) and body.get("build") is not None:
                # null, like no value, is the default wait of 30 s
                timeout = body.get("timeout_ms")
                body["timeout_ms"] = WAIT_CAP_MS if timeout is None else capped(timeout)


# What the document cannot say, and so generation alone almost never meets:
# SQL that SQLite accepts, a store made from one of this server's templates
# (migrations, named fixtures), a fixture that template has, and one of two
# query parameters. Half of the generated values of these operations are
# replaced by valid ones; the other half stay as generated.
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
TEMPLATES = {name: sorted(os.path.splitext(f)[0] for f in os.listdir(os.path.join(FIXTURES, name, "data")))
             for name in sorted(os.listdir(FIXTURES)) if os.path.isdir(os.path.join(FIXTURES, name, "data"))}
VALID_BODIES = {
    ("POST", "/stores"): [{"template": t} for t in TEMPLATES] + [{"template": t, "fixtures": f[:1]} for t, f in TEMPLATES.items()],
    ("POST", "/stores/{id}/query"): [{"sql": "SELECT count(*) FROM sqlite_schema"}, {"sql": "SELECT ?1 + 1", "params": [41]},
                                     {"sql": "SELECT name FROM sqlite_schema WHERE type = :type", "params": {"type": "table"}}],
    ("POST", "/stores/{id}/fixtures"): [{"fixtures": f[:1]} for f in TEMPLATES.values()]
                                       + [{"sql": "CREATE TABLE IF NOT EXISTS schemathesis (x)"}, {"rows": {"schemathesis": [{"x": 1}]}}],
    ("POST", "/stores/{id}/migrate"): [{"to": "latest"}, {}],
    ("POST", "/stores/{id}/check"): [{"against": {"template": t}} for t in TEMPLATES],
}


def database_bytes():
    """A small SQLite database's bytes, and a zip of it with an empty -wal."""
    import io
    import sqlite3
    import zipfile
    db = sqlite3.connect(":memory:")
    db.executescript("CREATE TABLE schemathesis (x); INSERT INTO schemathesis VALUES (1);")
    data = db.serialize()
    db.close()
    bundle = io.BytesIO()
    with zipfile.ZipFile(bundle, "w") as z:
        z.writestr("app.sqlite", data)
        z.writestr("app.sqlite-wal", b"")
    return [data, bundle.getvalue()]


# (Either may meet either media type: a database sent as a zip is a 400 not_a_database, as it should be.)
VALID_BODIES[("PUT", "/stores/{id}/database")] = database_bytes()
VALID_QUERIES = {
    ("DELETE", "/stores"): [{"label_prefix": "schemathesis/"}, {"label": "schemathesis"}],
}


def mixed(context, strategy, valid):
    from hypothesis import strategies as st
    operation = context.operation
    choices = valid.get((operation.method.upper(), operation.path)) if operation is not None else None
    return st.one_of(strategy, st.sampled_from(choices)) if choices else strategy


@schemathesis.hook
def before_generate_body(context, strategy):
    return mixed(context, strategy, VALID_BODIES)


@schemathesis.hook
def before_generate_query(context, strategy):
    return mixed(context, strategy, VALID_QUERIES)
