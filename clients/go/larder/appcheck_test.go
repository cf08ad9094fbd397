package larder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/larder-dev/larder/clients/go/internal/testenv"
)

// Checking old databases that the app's own migrator migrates
// (POST /stores/{id}/check), with testenv's notes app (the sqlite3 shell as
// its migrator); the reference is a build the same migrator made.

// notesBuild is a build of the kind's migrations, made by the same migrator.
func notesBuild(t *testing.T, kind string) string {
	key := buildKey(t)
	if _, err := FromEnvironment().Build(testenv.Context(t), key, testenv.AppMigrator(t, testenv.NotesMigrations[kind])); err != nil {
		t.Fatal(err)
	}
	return key
}

func wantGone(t *testing.T, id string) {
	t.Helper()
	_, err := FromEnvironment().GetStore(testenv.Context(t), id)
	var e *Error
	if !errors.As(err, &e) || e.Code != "store_not_found" {
		t.Errorf("store %s: %v, want 404 store_not_found (deleted)", id, err)
	}
}

func wantKept(t *testing.T, id string) {
	t.Helper()
	s, err := FromEnvironment().GetStore(testenv.Context(t), id)
	if err != nil {
		t.Fatalf("store %s: %v, want it kept", id, err)
	}
	if !s.Info.Keep {
		t.Errorf("store %s: keep false, want it kept", id)
	}
	_ = s.Delete(testenv.Context(t))
}

const v1Expect = `{"before": ["SELECT count(*) = 3 FROM notes"], "counts": {"notes": 3}, "assert": ["SELECT count(*) = 0 FROM notes WHERE pinned"]}`

func TestUploadAndCheck(t *testing.T) {
	ctx := testenv.Context(t)
	client := FromEnvironment()
	build := notesBuild(t, "good")
	dir := testenv.SnapshotsDir(t, "")
	store, err := client.Upload(ctx, filepath.Join(dir, "v1.sqlite"), UploadOptions{Label: "go upload"})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Delete(ctx)
	if store.Info.Template != "" || store.Info.Label != "go upload" || store.Info.Counts["notes"] != 3 {
		t.Errorf("uploaded store: %+v, want no template, its label, 3 notes", store.Info)
	}
	if err := testenv.AppMigrator(t, testenv.NotesMigrations["good"])(ctx, store.Path); err != nil {
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
	ctx := testenv.Context(t)
	client := FromEnvironment()
	dir := testenv.SnapshotsDir(t, v1Expect)
	opts := SnapshotOptions{Against: Reference{Build: notesBuild(t, "good")}, Migrate: testenv.AppMigrator(t, testenv.NotesMigrations["good"])}
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
	dir := testenv.SnapshotsDir(t, "")
	v1 := filepath.Join(dir, "v1.sqlite")
	good, lossy := notesBuild(t, "good"), notesBuild(t, "lossy")

	t.Run("a dropped column that held data", func(t *testing.T) {
		opts := SnapshotOptions{Against: Reference{Build: lossy}, Migrate: testenv.AppMigrator(t, testenv.NotesMigrations["lossy"])}
		r, err := client.CheckSnapshot(testenv.Context(t), v1, opts)
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
		if r, err := client.CheckSnapshot(testenv.Context(t), v1, opts); err != nil || !r.Passed {
			t.Errorf("without the data rule: %+v, %v, want passed", r, err)
		}
	})

	t.Run("an index left behind", func(t *testing.T) {
		r, err := client.CheckSnapshot(testenv.Context(t), v1, SnapshotOptions{Against: Reference{Build: good}, Migrate: testenv.AppMigrator(t, testenv.NotesMigrations["forgetful"])})
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
			Migrate: testenv.AppMigrator(t, testenv.NotesMigrations["good"]),
			Expect:  map[string]any{"before": []string{"SELECT count(*) = 5 FROM notes"}},
		}
		r, err := client.CheckSnapshot(testenv.Context(t), v1, opts)
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
		_, err := client.CheckSnapshot(testenv.Context(t), v1, SnapshotOptions{
			Against: Reference{Build: good},
			Migrate: func(context.Context, string) error { return boom },
		})
		m := regexp.MustCompile(`^larder: v1\.sqlite: the migrator failed on store (st_\w+) \(kept\): boom$`).FindStringSubmatch(fmt.Sprint(err))
		if !errors.Is(err, boom) || m == nil {
			t.Fatalf("%v, want the migrator's error wrapped, naming the snapshot and the kept store", err)
		}
		wantKept(t, m[1])
		if _, err := client.CheckSnapshot(testenv.Context(t), v1, SnapshotOptions{Against: Reference{Build: good}}); err == nil {
			t.Error("no Migrate: no error")
		}
	})

	t.Run("a check that cannot run", func(t *testing.T) {
		_, err := client.CheckSnapshot(testenv.Context(t), v1, SnapshotOptions{Against: Reference{Build: "no-such-build"}, Migrate: testenv.AppMigrator(t, testenv.NotesMigrations["good"])})
		var e *Error
		if !errors.As(err, &e) || e.Code != "unknown_build" {
			t.Errorf("%v, want unknown_build", err)
		}
	})
}
