"""The test's work in bench/frameworks' Python suites: one row inserted and
committed into the SQLite file at `path`, with Python's sqlite3 module (or
the sqlite3 command-line tool when LARDER_BENCH_WRITER=cli)."""
import os
import shutil  # noqa: F401  (the naive suite's; imported alike by every suite)
import sqlite3
import subprocess

ROW = "INSERT INTO albums (title) VALUES ('Summer')"
TEMPLATE = os.environ.get("LARDER_BENCH_TEMPLATE", "")
CLI = os.environ.get("LARDER_BENCH_WRITER") == "cli"


def write(path):
    if CLI:
        subprocess.run(["sqlite3", str(path), ROW], check=True)
        return
    db = sqlite3.connect(path)
    try:
        db.execute(ROW)
        db.commit()
    finally:
        db.close()
