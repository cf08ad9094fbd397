package larder

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Checking old databases that the app's own migrator migrates
// (POST /stores/{id}/check). The sqlite3 shell plays the app's migrator:
// SQL migrations, each in a transaction that records its version in
// alembic_version, as Alembic does; the reference is a build the same
// migrator made.

type migration struct {
	Version string `json:"version"`
	SQL     string `json:"sql"`
}

const (
	notesV1 = "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL, tag TEXT); CREATE INDEX notes_tag ON notes(tag);"
	pinned  = "ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;"
	v1Data  = "INSERT INTO notes (body, tag) VALUES ('a', 'x'), ('b', 'y'), ('c', NULL);"
	v2Data  = "INSERT INTO notes (body, tag, pinned) VALUES ('d', 'z', 1), ('e', NULL, 0);"
)

// The notes schema's migrations: 0002 replaces the tag index with a
// (tag, pinned) one. lossy's 0002 drops a column that holds data (its build
// has no such column either: only the data rule can tell); forgetful's
// leaves the old index behind.
var notesMigrations = map[string][]migration{
	"good":      {{"0001", notesV1}, {"0002", pinned + " DROP INDEX notes_tag; CREATE INDEX notes_tag_pinned ON notes(tag, pinned);"}},
	"lossy":     {{"0001", notesV1}, {"0002", pinned + " DROP INDEX notes_tag; ALTER TABLE notes DROP COLUMN tag;"}},
	"forgetful": {{"0001", notesV1}, {"0002", pinned + " CREATE INDEX notes_tag_pinned ON notes(tag, pinned);"}},
}

// runSQL runs sql on the file at path with the sqlite3 shell; its output.
func runSQL(ctx context.Context, shell, path, sql string) (string, error) {
	cmd := exec.CommandContext(ctx, shell, "-bail", path)
	cmd.Stdin = strings.NewReader(sql)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("sqlite3: %w: %s", err, bytes.TrimSpace(errOut.Bytes()))
	}
	return strings.TrimSpace(out.String()), nil
}

// appMigrator brings a database from the version its alembic_version names
// (none: empty) up to the last of steps.
func appMigrator(t *testing.T, steps []migration) func(ctx context.Context, path string) error {
	shell := sqlite3Shell(t)
	return func(ctx context.Context, path string) error {
		current, err := runSQL(ctx, shell, path, "CREATE TABLE IF NOT EXISTS alembic_version (version_num TEXT NOT NULL); SELECT version_num FROM alembic_version;")
		if err != nil {
			return err
		}
		for _, m := range steps {
			if current != "" && m.Version <= current {
				continue
			}
			sql := fmt.Sprintf("BEGIN; %s DELETE FROM alembic_version; INSERT INTO alembic_version VALUES ('%s'); COMMIT;", m.SQL, m.Version)
			if _, err := runSQL(ctx, shell, path, sql); err != nil {
				return err
			}
		}
		return nil
	}
}

// makeSnapshot makes the old database path: steps migrated, then data.
func makeSnapshot(t *testing.T, path string, steps []migration, data string) {
	t.Helper()
	ctx := testContext(t)
	if err := appMigrator(t, steps)(ctx, path); err != nil {
		t.Fatal(err)
	}
	if _, err := runSQL(ctx, sqlite3Shell(t), path, data); err != nil {
		t.Fatal(err)
	}
}

// snapshotsDir is a directory of v1.sqlite (at 0001, with v1.expect.json
// holding v1Expect) and v2.sqlite (at 0002).
func snapshotsDir(t *testing.T, v1Expect string) string {
	dir := t.TempDir()
	makeSnapshot(t, filepath.Join(dir, "v1.sqlite"), notesMigrations["good"][:1], v1Data)
	if v1Expect != "" {
		if err := os.WriteFile(filepath.Join(dir, "v1.expect.json"), []byte(v1Expect), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	makeSnapshot(t, filepath.Join(dir, "v2.sqlite"), notesMigrations["good"], v2Data)
	return dir
}

// notesBuild is a build of the kind's migrations, made by the same migrator.
func notesBuild(t *testing.T, kind string) string {
	key := buildKey(t)
	if _, err := FromEnvironment().Build(testContext(t), key, appMigrator(t, notesMigrations[kind])); err != nil {
		t.Fatal(err)
	}
	return key
}

func wantGone(t *testing.T, id string) {
	t.Helper()
	_, err := FromEnvironment().GetStore(testContext(t), id)
	var e *Error
	if !errors.As(err, &e) || e.Code != "store_not_found" {
		t.Errorf("store %s: %v, want 404 store_not_found (deleted)", id, err)
	}
}

func wantKept(t *testing.T, id string) {
	t.Helper()
	s, err := FromEnvironment().GetStore(testContext(t), id)
	if err != nil {
		t.Fatalf("store %s: %v, want it kept", id, err)
	}
	if !s.Info.Keep {
		t.Errorf("store %s: keep false, want it kept", id)
	}
	_ = s.Delete(testContext(t))
}

const v1Expect = `{"before": ["SELECT count(*) = 3 FROM notes"], "counts": {"notes": 3}, "assert": ["SELECT count(*) = 0 FROM notes WHERE pinned"]}`

func TestUploadAndCheck(t *testing.T) {
	ctx := testContext(t)
	client := FromEnvironment()
	build := notesBuild(t, "good")
	dir := snapshotsDir(t, "")
	store, err := client.Upload(ctx, filepath.Join(dir, "v1.sqlite"), UploadOptions{Label: "go upload"})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Delete(ctx)
	if store.Info.Template != "" || store.Info.Label != "go upload" || store.Info.Counts["notes"] != 3 {
		t.Errorf("uploaded store: %+v, want no template, its label, 3 notes", store.Info)
	}
	if err := appMigrator(t, notesMigrations["good"])(ctx, store.Path); err != nil {
		t.Fatal(err)
	}
	var expect map[string]any
	if err := json.Unmarshal([]byte(v1Expect), &expect); err != nil {
		t.Fatal(err)
	}
	r, err := store.Check(ctx, Reference{Build: build}, CheckOptions{Snapshot: "v1.sqlite", Expect: expect})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Passed || r.Kind != "app" || r.Template != "" || r.Snapshot != "v1.sqlite" || r.FromVersion != "0001" || r.ToVersion != "0002" || len(r.Failures) != 0 {
		t.Errorf("check: %+v, want a passed app check of v1.sqlite from 0001 to 0002", r)
	}
	if r.Raw["kind"] != "app" {
		t.Errorf("Raw: %v", r.Raw)
	}

	// A failed check (422) is a result, not an error.
	r, err = client.Check(ctx, store.ID, Reference{Template: "gallery", Version: "latest"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Passed || len(r.Failures) == 0 || !strings.HasPrefix(r.Failures[0], "schema differs from the reference: ") {
		t.Errorf("against gallery: %+v, want schema failures", r)
	}
	if r, err = store.Check(ctx, Reference{Store: store.ID}); err != nil || !r.Passed {
		t.Errorf("against itself: %+v, %v, want passed", r, err)
	}

	// What cannot be judged is a *Error.
	made, err := client.CreateStore(ctx, StoreOptions{Template: "gallery"})
	if err != nil {
		t.Fatal(err)
	}
	defer made.Delete(ctx)
	for _, c := range []struct {
		id     string
		ref    Reference
		status int
		code   string
	}{
		{store.ID, Reference{Build: "no-such-build"}, 404, "unknown_build"},
		{store.ID, Reference{Template: "no-such-template"}, 404, "unknown_template"},
		{"st_nope", Reference{Build: build}, 404, "store_not_found"},
		{made.ID, Reference{Build: build}, 400, "bad_request"},
	} {
		_, err := client.Check(ctx, c.id, c.ref)
		var e *Error
		if !errors.As(err, &e) || e.Status != c.status || e.Code != c.code {
			t.Errorf("check %s against %+v: %v, want %d %s", c.id, c.ref, err, c.status, c.code)
		} else if c.status == 400 && e.Details["reason"] != "not_an_upload" {
			t.Errorf("not an upload: details %v", e.Details)
		}
	}
	for _, ref := range []Reference{{}, {Build: "a", Store: "b"}, {Version: "1"}} {
		if _, err := client.Check(ctx, store.ID, ref); err == nil {
			t.Errorf("reference %+v: no error", ref)
		}
	}
}

func TestCheckSnapshotPassesAndDeletesItsStore(t *testing.T) {
	ctx := testContext(t)
	client := FromEnvironment()
	dir := snapshotsDir(t, v1Expect)
	opts := SnapshotOptions{Against: Reference{Build: notesBuild(t, "good")}, Migrate: appMigrator(t, notesMigrations["good"])}
	r, err := client.CheckSnapshot(ctx, filepath.Join(dir, "v1.sqlite"), opts)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Passed || r.Snapshot != "v1.sqlite" || r.FromVersion != "0001" || r.ToVersion != "0002" || r.Kept || r.StoreID == "" {
		t.Errorf("v1.sqlite: %+v\n%s", r, r)
	}
	wantGone(t, r.StoreID)
	if got := r.String(); got != "v1.sqlite (0001 → 0002) passed the migration check" {
		t.Errorf("String() = %q", got)
	}

	results, err := client.CheckSnapshots(ctx, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range results {
		got = append(got, fmt.Sprintf("%s %s→%s %v", r.Snapshot, r.FromVersion, r.ToVersion, r.Passed))
	}
	if strings.Join(got, "; ") != "v1.sqlite 0001→0002 true; v2.sqlite 0002→0002 true" {
		t.Errorf("CheckSnapshots: %v", got)
	}
	opts.Expect = map[string]any{}
	if _, err := client.CheckSnapshots(ctx, dir, opts); err == nil || !strings.Contains(err.Error(), "per snapshot") {
		t.Errorf("CheckSnapshots with Expect: %v, want refused", err)
	}
}

func TestCheckSnapshotFailures(t *testing.T) {
	client := FromEnvironment()
	dir := snapshotsDir(t, "")
	v1 := filepath.Join(dir, "v1.sqlite")
	good, lossy := notesBuild(t, "good"), notesBuild(t, "lossy")

	t.Run("a dropped column that held data", func(t *testing.T) {
		opts := SnapshotOptions{Against: Reference{Build: lossy}, Migrate: appMigrator(t, notesMigrations["lossy"])}
		r, err := client.CheckSnapshot(testContext(t), v1, opts)
		if err != nil {
			t.Fatal(err)
		}
		want := "notes.tag held 2 non-NULL values; the migrated store has no column tag"
		if r.Passed || !r.Kept || len(r.Failures) != 1 || r.Failures[0] != want {
			t.Errorf("%+v, want failed and kept with %q", r, want)
		}
		wantKept(t, r.StoreID)
		// The reference has no tag column either: only the data rule tells.
		opts.SkipDataCheck = true
		if r, err := client.CheckSnapshot(testContext(t), v1, opts); err != nil || !r.Passed {
			t.Errorf("without the data rule: %+v, %v, want passed", r, err)
		}
	})

	t.Run("an index left behind", func(t *testing.T) {
		r, err := client.CheckSnapshot(testContext(t), v1, SnapshotOptions{Against: Reference{Build: good}, Migrate: appMigrator(t, notesMigrations["forgetful"])})
		if err != nil {
			t.Fatal(err)
		}
		if r.Passed || len(r.Failures) != 1 || !strings.HasPrefix(r.Failures[0], "schema differs from the reference: index notes_tag on notes ") {
			t.Errorf("%+v, want one failure naming index notes_tag", r)
		}
		wantKept(t, r.StoreID)
	})

	t.Run("a false before", func(t *testing.T) {
		opts := SnapshotOptions{
			Against: Reference{Build: good},
			Migrate: appMigrator(t, notesMigrations["good"]),
			Expect:  map[string]any{"before": []string{"SELECT count(*) = 5 FROM notes"}},
		}
		r, err := client.CheckSnapshot(testContext(t), v1, opts)
		if err != nil {
			t.Fatal(err)
		}
		want := "before is false (got 0): SELECT count(*) = 5 FROM notes"
		if r.Passed || len(r.Failures) != 1 || r.Failures[0] != want {
			t.Errorf("%+v, want failed with %q", r, want)
		}
		wantKept(t, r.StoreID)
		text := r.String()
		wantText := "v1.sqlite (0001 → 0002) failed the migration check; store " + r.StoreID + " is kept:\n    " + want
		if text != wantText {
			t.Errorf("String() = %q, want %q", text, wantText)
		}
	})

	t.Run("a migrator that fails", func(t *testing.T) {
		boom := errors.New("boom")
		_, err := client.CheckSnapshot(testContext(t), v1, SnapshotOptions{
			Against: Reference{Build: good},
			Migrate: func(context.Context, string) error { return boom },
		})
		m := regexp.MustCompile(`^larder: v1\.sqlite: the migrator failed on store (st_\w+) \(kept\): boom$`).FindStringSubmatch(fmt.Sprint(err))
		if !errors.Is(err, boom) || m == nil {
			t.Fatalf("%v, want the migrator's error wrapped, naming the snapshot and the kept store", err)
		}
		wantKept(t, m[1])
		if _, err := client.CheckSnapshot(testContext(t), v1, SnapshotOptions{Against: Reference{Build: good}}); err == nil {
			t.Error("no Migrate: no error")
		}
	})

	t.Run("a check that cannot run", func(t *testing.T) {
		_, err := client.CheckSnapshot(testContext(t), v1, SnapshotOptions{Against: Reference{Build: "no-such-build"}, Migrate: appMigrator(t, notesMigrations["good"])})
		var e *Error
		if !errors.As(err, &e) || e.Code != "unknown_build" {
			t.Errorf("%v, want unknown_build", err)
		}
	})
}

// TestCheckSnapshotsInASubprocess runs `go test` on testdata/appcheck,
// whose test calls CheckSnapshots(t, ...) on v1.sqlite (its migrator
// leaves an index behind, and its expect.json's before is false) and
// v2.sqlite (passes): one subtest per snapshot, the failing one's output
// listing every failure, the snapshot's versions and the kept store,
// labelled RUN/appcheck/TestMigrations/v1.sqlite.
func TestCheckSnapshotsInASubprocess(t *testing.T) {
	dir := snapshotsDir(t, `{"before": ["SELECT count(*) = 5 FROM notes"]}`)
	migrations, _ := json.Marshal(notesMigrations["forgetful"])
	output, err := runSampleModule(t, "appcheck",
		"LARDER_RUN=go-appcheck-run",
		"SAMPLE_SNAPSHOTS="+dir,
		"SAMPLE_BUILD="+notesBuild(t, "good"),
		"SAMPLE_MIGRATIONS="+string(migrations),
	)
	if os.Getenv("LARDER_SHOW_SAMPLE") != "" {
		t.Logf("the sample's output:\n%s", output)
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("go test of the sample: %v, want exit status 1 (a snapshot fails); output:\n%s", err, output)
	}
	for _, want := range []string{"--- FAIL: TestMigrations/v1.sqlite", "--- PASS: TestMigrations/v2.sqlite", "--- FAIL: TestMigrations "} {
		if !strings.Contains(output, want) {
			t.Errorf("output lacks %q:\n%s", want, output)
		}
	}
	m := regexp.MustCompile(`v1\.sqlite \(0001 → 0002\) failed the migration check; store (st_\w+) is kept:\n\s+(.*)\n\s+(.*)\n`).FindStringSubmatch(output)
	if m == nil {
		t.Fatalf("no failure naming v1.sqlite, its versions and its store:\n%s", output)
	}
	if m[2] != "before is false (got 0): SELECT count(*) = 5 FROM notes" ||
		!strings.HasPrefix(m[3], "schema differs from the reference: index notes_tag on notes ") {
		t.Errorf("the failure's lines: %q, %q; want the false before and the index left behind\n%s", m[2], m[3], output)
	}
	// Labelled as StoreForTest labels a test's store: RUN/PACKAGE/TEST, the
	// subtest's name.
	if s, err := FromEnvironment().GetStore(testContext(t), m[1]); err != nil {
		t.Errorf("the kept store %s: %v", m[1], err)
	} else if want := "go-appcheck-run/appcheck/TestMigrations/v1.sqlite"; s.Info.Label != want {
		t.Errorf("the kept store %s is labelled %q, want %q", m[1], s.Info.Label, want)
	}
	wantKept(t, m[1])
}
