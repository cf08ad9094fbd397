package lardertest

import (
	"archive/zip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/larder-dev/larder/clients/go/internal/testenv"
	"github.com/larder-dev/larder/clients/go/larder"
)

// TestStoreForTestInRemoteMode runs `go test` on testdata/remote with
// LARDER_MODE=remote against a hidden server (testenv.HiddenServer), whose
// stores' files the sample cannot open: its tests write to their local
// copies. The passing test's store is gone, with no store left under its
// label; the failing test's copy was checked in, -wal and all, so the kept
// store's diff and the artifact saved hold its write; the test whose copy
// the server refuses says so, and its store is kept and its artifact saved
// all the same. No local copy is left in the sample's TMPDIR.
func TestStoreForTestInRemoteMode(t *testing.T) {
	server := testenv.HiddenServer(t)
	artifacts := filepath.Join(t.TempDir(), "artifacts")
	tmp := t.TempDir()
	run := fmt.Sprintf("go-remote-%d", time.Now().UnixNano())
	output, err := runSampleModule(t, "remote", "LARDER_URL="+server.URL, "LARDER_MODE=remote",
		"LARDER_ARTIFACTS="+artifacts, "LARDER_RUN="+run, "TMPDIR="+tmp)
	if os.Getenv("LARDER_SHOW_SAMPLE") != "" {
		t.Logf("the sample's output:\n%s", output)
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("go test of the sample: %v, want exit status 1 (two tests fail); output:\n%s", err, output)
	}
	for _, want := range []string{"--- PASS: TestPasses", "--- FAIL: TestFails/deliberately", "--- FAIL: TestFailsWithABrokenCopy", "this test fails on purpose"} {
		if !strings.Contains(output, want) {
			t.Errorf("output lacks %q:\n%s", want, output)
		}
	}
	ids, paths := map[string]string{}, map[string]string{}
	for _, m := range regexp.MustCompile(`SAMPLE_STORE (\S+) (\S+) (\S+)`).FindAllStringSubmatch(output, -1) {
		ids[m[1]], paths[m[1]] = m[2], m[3]
	}
	passed, failed, broken := ids["TestPasses"], ids["TestFails/deliberately"], ids["TestFailsWithABrokenCopy"]
	if passed == "" || failed == "" || broken == "" {
		t.Fatalf("store ids not found in the output:\n%s", output)
	}
	client := larder.New(server.URL, "")
	ctx := testenv.Context(t)
	t.Cleanup(func() {
		for _, id := range []string{failed, broken} {
			if s, err := client.GetStore(testenv.Context(t), id); err == nil {
				_ = s.Delete(testenv.Context(t))
			}
		}
	})

	// The passing test's store is deleted.
	if _, err := client.GetStore(ctx, passed); !larder.IsNotFound(err) {
		t.Errorf("the passing test's store %s: %v, want 404 store_not_found", passed, err)
	}
	if left := listStores(t, server.URL, run+"/remote/TestPasses"); len(left) != 0 {
		t.Errorf("stores labelled %s/remote/TestPasses: %v, want none", run, left)
	}
	if got, want := listStores(t, server.URL, run+"/"), sorted(failed, broken); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the run's stores: %v, want the two failed tests' %v", got, want)
	}

	// The failing test's copy was checked in before its store was kept.
	kept, err := client.GetStore(ctx, failed)
	if err != nil {
		t.Fatalf("the failing test's store %s: %v", failed, err)
	}
	if label := run + "/remote/TestFails/deliberately"; !kept.Info.Keep || kept.Info.Label != label {
		t.Errorf("the failing test's store: keep %v label %q, want keep true and label %q", kept.Info.Keep, kept.Info.Label, label)
	}
	d, err := kept.Diff(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a := d.Tables["artists"]; a.Inserted != 1 || len(a.Rows) != 1 || a.Rows[0].New["name"] != "Left behind" || len(d.Tables) != 1 {
		t.Errorf("the kept store's diff: %+v, want the one artist the test wrote to its copy", d.Tables)
	}
	zipPath := filepath.Join(artifacts, "TestFails_deliberately-"+failed+".zip")
	if !strings.Contains(output, "artifact saved to "+zipPath) {
		t.Errorf("the test log does not tell where the artifact is (%s):\n%s", zipPath, output)
	}
	if counts, _ := testenv.ReadZip(t, zipPath)["counts"].(map[string]any); counts["artists"] != 5.0 {
		t.Errorf("the artifact's counts = %v, want the 5 artists of the test's copy", counts)
	}
	if got := artifactQuery(t, zipPath, "SELECT name FROM artists ORDER BY id DESC LIMIT 1;"); got != "Left behind" {
		t.Errorf("the artifact's last artist is %q, want the test's write", got)
	}

	// A copy the server refuses: said so; the store kept as made, its artifact saved.
	if !regexp.MustCompile(`local copy of store ` + broken + ` could not be checked in; the store is kept as last checked in: .*(400|415|422)`).MatchString(output) {
		t.Errorf("the output does not tell that the broken copy could not be checked in:\n%s", output)
	}
	refused, err := client.GetStore(ctx, broken)
	if err != nil || !refused.Info.Keep || refused.Info.Counts["artists"] != 4 {
		t.Errorf("the broken copy's store %s: %+v, %v; want it kept with its 4 artists", broken, refused, err)
	}
	testenv.ReadZip(t, filepath.Join(artifacts, "TestFailsWithABrokenCopy-"+broken+".zip"))

	// No local copy is left.
	for name, path := range paths {
		if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s's local copy %s: %v, want its folder removed", name, path, err)
		}
		if !strings.HasPrefix(path, tmp+string(filepath.Separator)) {
			t.Errorf("%s's local copy %s is not in the sample's TMPDIR %s", name, path, tmp)
		}
	}
	entries, _ := os.ReadDir(tmp)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "larder-remote-") {
			t.Errorf("the sample's TMPDIR still holds %s", e.Name())
		}
	}
}

// TestStoreForTestSelfStartedInRemoteMode runs the same sample with no
// LARDER_URL, LARDER_MODE=remote, and as LARDER_BINARY the hidden-larder
// wrapper, so that the server the helpers start (`larder up`) keeps its
// files out of the sample's reach: its tests get local copies (they check
// it), and the failing test's artifact holds what it wrote to its copy.
func TestStoreForTestSelfStartedInRemoteMode(t *testing.T) {
	wrapper, hiddenEnv := testenv.HiddenLarder(t)
	fixtures, err := testenv.FixturesDir()
	if err != nil {
		t.Fatal(err)
	}
	artifacts := filepath.Join(t.TempDir(), "artifacts")
	tmp := t.TempDir()
	output, err := runSampleModule(t, "remote", "LARDER_URL=", "LARDER_BINARY="+wrapper, hiddenEnv,
		"LARDER_FIXTURES="+fixtures, "LARDER_MODE=remote", "LARDER_ARTIFACTS="+artifacts, "TMPDIR="+tmp)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("go test of the sample: %v, want exit status 1 (two tests fail); output:\n%s", err, output)
	}
	for _, want := range []string{"--- PASS: TestPasses", "--- FAIL: TestFails/deliberately", "--- FAIL: TestFailsWithABrokenCopy", "could not be checked in"} {
		if !strings.Contains(output, want) {
			t.Errorf("output lacks %q:\n%s", want, output)
		}
	}
	m := regexp.MustCompile(`SAMPLE_STORE TestFails/deliberately (\S+) `).FindStringSubmatch(output)
	if m == nil {
		t.Fatalf("the failing test's store not found in the output:\n%s", output)
	}
	if got := artifactQuery(t, filepath.Join(artifacts, "TestFails_deliberately-"+m[1]+".zip"), "SELECT name FROM artists ORDER BY id DESC LIMIT 1;"); got != "Left behind" {
		t.Errorf("the artifact's last artist is %q, want the test's write", got)
	}
	entries, _ := os.ReadDir(tmp)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "larder-remote-") {
			t.Errorf("the sample's TMPDIR still holds %s", e.Name())
		}
	}
}

// listStores answers the ids of the stores of the server at base whose
// label begins with prefix (GET /stores?label_prefix=...), sorted.
func listStores(t *testing.T, base, prefix string) []string {
	t.Helper()
	req, err := http.NewRequestWithContext(testenv.Context(t), http.MethodGet, base+"/stores?"+url.Values{"label_prefix": {prefix}}.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var answer struct {
		Stores []struct {
			ID    string `json:"id"`
			Label string `json:"label"`
		} `json:"stores"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &answer) != nil || answer.Stores == nil {
		t.Fatalf("GET /stores?label_prefix=%s: %s %s, want 200 {\"stores\": [...]}", prefix, resp.Status, body)
	}
	var ids []string
	for _, s := range answer.Stores {
		if !strings.HasPrefix(s.Label, prefix) {
			t.Errorf("GET /stores?label_prefix=%s answers store %s labelled %q", prefix, s.ID, s.Label)
		}
		ids = append(ids, s.ID)
	}
	sort.Strings(ids)
	return ids
}

func sorted(s ...string) []string {
	sort.Strings(s)
	return s
}

// artifactQuery runs sql with the sqlite3 shell on the store.sqlite of the
// artifact zip at path.
func artifactQuery(t *testing.T, path, sql string) string {
	t.Helper()
	z, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	db := filepath.Join(t.TempDir(), "store.sqlite")
	for _, f := range z.File {
		if f.Name != "store.sqlite" {
			continue
		}
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(db, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err := testenv.RunSQL(testenv.Context(t), testenv.SQLite3(t), db, sql)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The test helpers' client takes its mode from TestServer.Mode, else
// LARDER_MODE; a LARDER_MODE that is neither value fails before anything
// is started.
func TestTestClientMode(t *testing.T) {
	saved := TestServer
	t.Cleanup(func() { TestServer = saved })
	t.Setenv("LARDER_URL", "http://127.0.0.1:9")
	t.Setenv("LARDER_MODE", "remote")
	c, err := TestClient()
	if err != nil {
		t.Fatal(err)
	}
	if m, err := c.ResolveMode(); m != larder.ModeRemote || err != nil {
		t.Errorf("LARDER_MODE=remote: mode %q, %v", m, err)
	}
	TestServer.Mode = larder.ModeLocal
	if c, err = TestClient(); err != nil || c.Mode != larder.ModeLocal {
		t.Errorf("TestServer.Mode local: %+v, %v", c, err)
	} else if m, _ := c.ResolveMode(); m != larder.ModeLocal {
		t.Errorf("TestServer.Mode local beats LARDER_MODE=remote: mode %q", m)
	}
	TestServer.Mode = ""
	t.Setenv("LARDER_MODE", "sometimes")
	for _, url := range []string{"http://127.0.0.1:9", ""} {
		t.Setenv("LARDER_URL", url)
		t.Setenv("LARDER_BINARY", "/nonexistent/larder") // never run
		if _, err := TestClient(); err == nil || !strings.Contains(err.Error(), `LARDER_MODE is "sometimes"`) {
			t.Errorf("LARDER_MODE=sometimes, LARDER_URL=%q: %v, want an error naming LARDER_MODE", url, err)
		}
	}
}
