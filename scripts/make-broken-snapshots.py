#!/usr/bin/env python3
"""Regenerates Tests/fixtures/broken/shop/snapshots: one snapshot per kind of
failure that `larder check` must catch, plus two that must pass.

    python3 scripts/make-broken-snapshots.py
"""
import json
import os
import sqlite3

BASE = os.path.join(os.path.dirname(__file__), "..", "Tests", "fixtures", "broken", "shop")
MIGRATIONS = sorted(os.listdir(os.path.join(BASE, "migrations")))


def snapshot(name, version, data, expect=None, extra_versions=()):
    path = os.path.join(BASE, "snapshots", name + ".sqlite")
    for p in (path, path[:-7] + ".expect.json"):
        if os.path.exists(p):
            os.remove(p)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE larder_migrations (version TEXT NOT NULL PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at TEXT NOT NULL)")
    for file in MIGRATIONS[:version]:
        db.executescript(open(os.path.join(BASE, "migrations", file)).read())
        db.execute("INSERT INTO larder_migrations VALUES (?, ?, 'old', '2024-01-01')", (str(int(file[:4])), file[5:-4]))
    for v in extra_versions:
        db.execute("INSERT INTO larder_migrations VALUES (?, 'gone', 'old', '2024-01-01')", (v,))
    db.execute(f"PRAGMA user_version = {version}")
    db.executescript(data)
    db.execute("VACUUM")
    db.close()
    if expect is not None:
        with open(path[:-7] + ".expect.json", "w") as f:
            json.dump(expect, f, indent=1)
    return path


TWO_CUSTOMERS = "INSERT INTO customers VALUES (1, 'Ada'), (2, 'Grace'); INSERT INTO legacy_orders VALUES (1, 1, 10), (2, 2, 20);"

snapshot("good", 1, TWO_CUSTOMERS, {"version": "1", "counts": {"customers": 2, "orders": 2}, "assert": ["SELECT sum(total) = 30 FROM orders"]})
snapshot("preexisting", 2, TWO_CUSTOMERS + "INSERT INTO notes VALUES (1, 99, 'a note about a customer long gone');")
snapshot("fkbreak", 1, TWO_CUSTOMERS + "INSERT INTO legacy_orders VALUES (3, 42, 30);")
snapshot("gap", 2, TWO_CUSTOMERS, extra_versions=("7",))
snapshot("drift", 2, TWO_CUSTOMERS + "ALTER TABLE customers ADD COLUMN email TEXT;")
snapshot("expect", 1, TWO_CUSTOMERS, {"version": "2", "counts": {"customers": 5}, "min_counts": {"orders": 10},
                                      "assert": ["SELECT count(*) = 0 FROM customers"]})
path = snapshot("corrupt", 1, TWO_CUSTOMERS + "CREATE INDEX customers_name ON customers(name);" + "WITH RECURSIVE n(i) AS (SELECT 3 UNION ALL SELECT i + 1 FROM n WHERE i < 400) INSERT INTO customers SELECT i, 'customer ' || i FROM n;")
# Break the index's pages: the table reads, integrity_check does not pass.
db = sqlite3.connect(path)
root = db.execute("SELECT rootpage FROM sqlite_schema WHERE name = 'customers_name'").fetchone()[0]
page_size = db.execute("PRAGMA page_size").fetchone()[0]
db.close()
with open(path, "r+b") as f:
    f.seek((root - 1) * page_size + 8)
    f.write(b"\xff" * (page_size - 16))
print("broken snapshots written under", os.path.abspath(BASE))
