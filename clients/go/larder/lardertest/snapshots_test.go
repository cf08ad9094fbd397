package lardertest

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/larder-dev/larder/clients/go/internal/testenv"
	"github.com/larder-dev/larder/clients/go/larder"
)

// notesBuild is a build of testenv's notes app at the kind's migrations,
// discarded when the test ends.
func notesBuild(t *testing.T, kind string) string {
	key := testenv.BuildKey(t)
	t.Cleanup(func() {
		if err := larder.FromEnvironment().DiscardBuild(testenv.Context(t), key); err != nil && !larder.IsNotFound(err) {
			t.Errorf("discarding build %s: %v", key, err)
		}
	})
	if _, err := larder.FromEnvironment().Build(testenv.Context(t), key, testenv.AppMigrator(t, testenv.NotesMigrations[kind])); err != nil {
		t.Fatal(err)
	}
	return key
}

// wantKept checks that the store id is kept, then deletes it.
func wantKept(t *testing.T, id string) {
	t.Helper()
	s, err := larder.FromEnvironment().GetStore(testenv.Context(t), id)
	if err != nil {
		t.Fatalf("store %s: %v, want it kept", id, err)
	}
	if !s.Info.Keep {
		t.Errorf("store %s: keep false, want it kept", id)
	}
	_ = s.Delete(testenv.Context(t))
}

// TestCheckSnapshotsInASubprocess runs `go test` on testdata/appcheck,
// whose test calls CheckSnapshots(t, ...) on v1.sqlite (its migrator
// leaves an index behind, and its expect.json's before is false) and
// v2.sqlite (passes): one subtest per snapshot, the failing one's output
// listing every failure, the snapshot's versions and the kept store,
// labelled RUN/appcheck/TestMigrations/v1.sqlite.
func TestCheckSnapshotsInASubprocess(t *testing.T) {
	dir := testenv.SnapshotsDir(t, `{"before": ["SELECT count(*) = 5 FROM notes"]}`)
	migrations, _ := json.Marshal(testenv.NotesMigrations["forgetful"])
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
	if s, err := larder.FromEnvironment().GetStore(testenv.Context(t), m[1]); err != nil {
		t.Errorf("the kept store %s: %v", m[1], err)
	} else if want := "go-appcheck-run/appcheck/TestMigrations/v1.sqlite"; s.Info.Label != want {
		t.Errorf("the kept store %s is labelled %q, want %q", m[1], s.Info.Label, want)
	}
	wantKept(t, m[1])
}
