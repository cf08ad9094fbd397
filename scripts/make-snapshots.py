#!/usr/bin/env python3
"""Regenerates the snapshot databases in fixtures/*/snapshots/.

Each snapshot is what an older version of the app left on a device: the
schema at that version, some data, and that version's bookkeeping. They are
made by applying the template's own migration files with Python's sqlite3,
so they never depend on Larder itself.

    python3 scripts/make-snapshots.py [FIXTURES_DIR]
"""
import csv
import json
import os
import sqlite3
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "fixtures")


def fresh(path):
    for suffix in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    db = sqlite3.connect(path, isolation_level=None)
    return db


def gallery():
    base = os.path.join(ROOT, "gallery")
    migrations = sorted(f for f in os.listdir(os.path.join(base, "migrations")) if f.endswith(".sql"))
    data = os.path.join(base, "data")
    artists = json.load(open(os.path.join(data, "artists.json")))["artists"]
    with open(os.path.join(data, "artworks.csv"), newline="") as f:
        artworks = list(csv.DictReader(f))

    def build(version, bookkeeping):
        path = os.path.join(base, "snapshots", f"v{version}.sqlite")
        db = fresh(path)
        for name in migrations[:version]:
            db.executescript(open(os.path.join(base, "migrations", name)).read())
            if bookkeeping == "larder":
                db.execute("CREATE TABLE IF NOT EXISTS larder_migrations (version TEXT NOT NULL PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at TEXT NOT NULL)")
                v = str(int(name.split("_", 1)[0]))
                db.execute("INSERT INTO larder_migrations VALUES (?, ?, 'saved-by-an-older-app', '2024-01-01T00:00:00Z')",
                           (v, name.split("_", 1)[1][:-4]))
        db.execute(f"PRAGMA user_version = {version}")
        for a in artists:
            db.execute("INSERT INTO artists (id, name, born) VALUES (?, ?, ?)", (a["id"], a["name"], a["born"]))
        for w in artworks:
            db.execute("INSERT INTO artworks (id, artist_id, title, year) VALUES (?, ?, ?, ?)",
                       (int(w["id"]), int(w["artist_id"]), w["title"], int(w["year"]) if w["year"] else None))
        if version >= 3:
            db.execute("INSERT INTO albums (id, title, created_at) VALUES (1, 'Saved on an old phone', '2024-01-01T00:00:00Z')")
            db.executemany("INSERT INTO album_artworks VALUES (1, ?, ?)", [(1, 1), (4, 2), (7, 3)])
        if version >= 5:
            db.execute("INSERT INTO partners (id, name) VALUES (1, 'Moderna Museet')")
            db.execute("INSERT INTO artwork_partners VALUES (1, 1)")
        db.execute("VACUUM")
        db.close()

    build(2, "user_version")
    build(3, "larder")
    build(5, "larder")


def boardgames():
    base = os.path.join(ROOT, "boardgames")
    path = os.path.join(base, "snapshots", "v1.sqlite")
    db = fresh(path)
    db.executescript(open(os.path.join(base, "migrations", "1_create_board_games.up.sql")).read())
    # golang-migrate's own bookkeeping, as its sqlite3 driver writes it.
    db.executescript("CREATE TABLE IF NOT EXISTS schema_migrations (version uint64,dirty bool);"
                     "CREATE UNIQUE INDEX IF NOT EXISTS version_unique ON schema_migrations (version);")
    db.execute("INSERT INTO schema_migrations (version, dirty) VALUES (1, 0)")
    db.executemany("INSERT INTO board_games (id, name, min_players, max_players) VALUES (?, ?, ?, ?)",
                   [(1, "Carcassonne", 2, 5), (2, "Azul", 2, 4), (3, "Codenames", 2, 8)])
    db.execute("VACUUM")
    db.close()


if __name__ == "__main__":
    gallery()
    boardgames()
    print("snapshots written under", os.path.abspath(ROOT))
