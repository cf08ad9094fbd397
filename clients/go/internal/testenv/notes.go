// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The migration-check tests play the app's own migrator with the sqlite3
// shell: SQL migrations, each in a transaction that records its version in
// alembic_version, as Alembic does.

// Migration is one step of an app's migrations.
type Migration struct {
	Version string `json:"version"`
	SQL     string `json:"sql"`
}

const (
	notesV1 = "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL, tag TEXT); CREATE INDEX notes_tag ON notes(tag);"
	pinned  = "ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;"
	v1Data  = "INSERT INTO notes (body, tag) VALUES ('a', 'x'), ('b', 'y'), ('c', NULL);"
	v2Data  = "INSERT INTO notes (body, tag, pinned) VALUES ('d', 'z', 1), ('e', NULL, 0);"
)

// NotesMigrations are the notes schema's migrations: 0002 replaces the tag
// index with a (tag, pinned) one. lossy's 0002 drops a column that holds
// data (its build has no such column either: only the data rule can tell);
// forgetful's leaves the old index behind.
var NotesMigrations = map[string][]Migration{
	"good":      {{"0001", notesV1}, {"0002", pinned + " DROP INDEX notes_tag; CREATE INDEX notes_tag_pinned ON notes(tag, pinned);"}},
	"lossy":     {{"0001", notesV1}, {"0002", pinned + " DROP INDEX notes_tag; ALTER TABLE notes DROP COLUMN tag;"}},
	"forgetful": {{"0001", notesV1}, {"0002", pinned + " CREATE INDEX notes_tag_pinned ON notes(tag, pinned);"}},
}

// SQLite3 is the sqlite3 command line shell (scripts/setup installs it).
func SQLite3(t *testing.T) string {
	t.Helper()
	shell, err := exec.LookPath("sqlite3")
	if err != nil {
		t.Fatalf("these tests run the sqlite3 shell as the app's migrator (scripts/setup installs it): %v", err)
	}
	return shell
}

// RunSQL runs sql on the file at path with the sqlite3 shell; its output.
func RunSQL(ctx context.Context, shell, path, sql string) (string, error) {
	cmd := exec.CommandContext(ctx, shell, "-bail", path)
	cmd.Stdin = strings.NewReader(sql)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("sqlite3: %w: %s", err, bytes.TrimSpace(errOut.Bytes()))
	}
	return strings.TrimSpace(out.String()), nil
}

// AppMigrator brings a database from the version its alembic_version names
// (none: empty) up to the last of steps.
func AppMigrator(t *testing.T, steps []Migration) func(ctx context.Context, path string) error {
	shell := SQLite3(t)
	return func(ctx context.Context, path string) error {
		current, err := RunSQL(ctx, shell, path, "CREATE TABLE IF NOT EXISTS alembic_version (version_num TEXT NOT NULL); SELECT version_num FROM alembic_version;")
		if err != nil {
			return err
		}
		for _, m := range steps {
			if current != "" && m.Version <= current {
				continue
			}
			sql := fmt.Sprintf("BEGIN; %s DELETE FROM alembic_version; INSERT INTO alembic_version VALUES ('%s'); COMMIT;", m.SQL, m.Version)
			if _, err := RunSQL(ctx, shell, path, sql); err != nil {
				return err
			}
		}
		return nil
	}
}

// makeSnapshot makes the old database path: steps migrated, then data.
func makeSnapshot(t *testing.T, path string, steps []Migration, data string) {
	t.Helper()
	ctx := Context(t)
	if err := AppMigrator(t, steps)(ctx, path); err != nil {
		t.Fatal(err)
	}
	if _, err := RunSQL(ctx, SQLite3(t), path, data); err != nil {
		t.Fatal(err)
	}
}

// SnapshotsDir is a directory of v1.sqlite (at 0001, with v1.expect.json
// holding v1Expect) and v2.sqlite (at 0002).
func SnapshotsDir(t *testing.T, v1Expect string) string {
	dir := t.TempDir()
	makeSnapshot(t, filepath.Join(dir, "v1.sqlite"), NotesMigrations["good"][:1], v1Data)
	if v1Expect != "" {
		if err := os.WriteFile(filepath.Join(dir, "v1.expect.json"), []byte(v1Expect), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	makeSnapshot(t, filepath.Join(dir, "v2.sqlite"), NotesMigrations["good"], v2Data)
	return dir
}
