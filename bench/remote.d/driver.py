#!/usr/bin/env python3
"""bench/remote's Python driver: ITERATIONS tests of one SCENARIO against
the server at URL with clients/python (`larder.Client`, its mode from
$LARDER_MODE), after WARMUP tests not counted; prints one JSON object.

    driver.py SCENARIO URL ITERATIONS WARMUP TEMPLATE FIXTURES ARTIFACTS

SCENARIO is local-pass, remote-pass, local-fail or remote-fail; FIXTURES
names the data fixtures, comma-separated ("-": none). A test: create the
store, write one row into `store.path` with Python's sqlite3 module, then
as larder_store (the pytest plugin) ends it: a pass deletes the store; a
failure checks the copy in (remote), keeps the store and saves its
artifact (base=true) into ARTIFACTS, and closes the copy; the store is
then deleted, timed apart ("delete"): not part of a failed test.
"""
import json
import os
import sqlite3
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "clients", "python", "src"))
import larder  # noqa: E402  (this checkout's client)

ROW = "INSERT INTO albums (title) VALUES ('Summer')"


def write(path):
    db = sqlite3.connect(path)
    db.execute(ROW)
    db.commit()
    db.close()


def one(client, scenario, template, fixtures, artifacts, n):
    remote, failing = scenario.startswith("remote"), scenario.endswith("fail")
    steps, facts = {}, {}
    began = last = time.perf_counter()

    def step(name):
        nonlocal last
        now = time.perf_counter()
        steps[name] = (now - last) * 1000
        last = now

    store = client.create_store(template=template, fixtures=fixtures)
    step("create")
    path = store.path
    write(path)
    step("write")
    if store.remote != remote or (path == store.info["path"]) == remote:
        raise SystemExit("driver.py: %s: the store is remote=%s, path %s, the server's %s" % (scenario, store.remote, path, store.info["path"]))
    if not failing:
        store.delete()
        step("delete")
        steps["total"] = (last - began) * 1000
        return steps, facts
    if remote:
        store.check_in()
        step("checkin")
    store.keep()
    step("keep")
    artifact = store.artifact(os.path.join(artifacts, "python-%s-%d-%s.zip" % (scenario, n, store.id)))
    step("artifact")
    store.close()
    step("close")
    steps["total"] = (last - began) * 1000
    facts["albums"] = store.info["counts"].get("albums")
    facts["artifact_bytes"] = os.path.getsize(artifact)
    facts["size_bytes"] = store.info.get("size_bytes")
    os.unlink(artifact)
    last = time.perf_counter()
    store.delete()
    step("delete")
    return steps, facts


def main():
    scenario, url, iterations, warmup, template, fixtures, artifacts = sys.argv[1:8]
    fixtures = None if fixtures == "-" else fixtures.split(",")
    client = larder.Client(url=url)
    out = {"client": "python", "scenario": scenario, "mode": client.mode, "iterations": [], "facts": [],
           "writer": "sqlite3 module, SQLite %s" % sqlite3.sqlite_version}
    for n in range(int(warmup) + int(iterations)):
        steps, facts = one(client, scenario, template, fixtures, artifacts, n)
        if n >= int(warmup):
            out["iterations"].append(steps)
            out["facts"].append(facts)
    client.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
