package lardertest

import (
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
	"strings"
	"testing"
	"time"

	"github.com/larder-dev/larder/clients/go/internal/testenv"
	"github.com/larder-dev/larder/clients/go/larder"
)

// TestStoreForTestInASubprocess runs `go test` on testdata/sample, which has
// one passing and one failing test using StoreForTest, against this server
// as a run with the prefix LARDER_RUN: the failing test's store is kept,
// labelled RUN/sample/TestFails/deliberately, and its artifact saved under
// LARDER_ARTIFACTS; the passing test's store is gone. Then DELETE
// /stores?label_prefix=RUN/ removes the run's kept store, and only it: a
// kept store of another run stays, one whose run id merely begins with RUN
// too.
func TestStoreForTestInASubprocess(t *testing.T) {
	artifacts := filepath.Join(t.TempDir(), "artifacts")
	run := fmt.Sprintf("go-run-%d", time.Now().UnixNano())
	output, err := runSampleModule(t, "sample", "LARDER_ARTIFACTS="+artifacts, "LARDER_RUN="+run)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("go test of the sample: %v, want exit status 1 (one test fails); output:\n%s", err, output)
	}
	for _, want := range []string{"--- PASS: TestPasses", "--- FAIL: TestFails/deliberately", "this test fails on purpose"} {
		if !strings.Contains(output, want) {
			t.Errorf("output lacks %q:\n%s", want, output)
		}
	}
	ids := map[string]string{}
	for _, m := range regexp.MustCompile(`SAMPLE_STORE (\S+) (\S+)`).FindAllStringSubmatch(output, -1) {
		ids[m[1]] = m[2]
	}
	passed, failed := ids["TestPasses"], ids["TestFails/deliberately"]
	if passed == "" || failed == "" {
		t.Fatalf("store ids not found in the output:\n%s", output)
	}

	client := larder.FromEnvironment()
	tctx := testenv.Context(t)
	_, err = client.GetStore(tctx, passed)
	var e *larder.Error
	if !errors.As(err, &e) || e.Status != 404 || e.Code != "store_not_found" {
		t.Errorf("the passing test's store %s: %v, want 404 store_not_found", passed, err)
	}

	kept, err := client.GetStore(tctx, failed)
	if err != nil {
		t.Fatalf("the failing test's store %s: %v", failed, err)
	}
	t.Cleanup(func() { _ = kept.Delete(testenv.Context(t)) })
	if label := run + "/sample/TestFails/deliberately"; !kept.Info.Keep || kept.Info.Label != label {
		t.Errorf("the failing test's store: keep %v label %q, want keep true and label %q", kept.Info.Keep, kept.Info.Label, label)
	}
	zipPath := filepath.Join(artifacts, "TestFails_deliberately-"+failed+".zip")
	if !strings.Contains(output, "artifact saved to "+zipPath) {
		t.Errorf("the test log does not tell where the artifact is (%s):\n%s", zipPath, output)
	}
	manifest := testenv.ReadZip(t, zipPath)
	if manifest["id"] != failed {
		t.Errorf("manifest id %v, want %s", manifest["id"], failed)
	}
	if counts, _ := manifest["counts"].(map[string]any); counts["artists"] != 5.0 {
		t.Errorf("the artifact's counts = %v, want the failing state's 5 artists", manifest["counts"])
	}
	entries, _ := os.ReadDir(artifacts)
	if len(entries) != 1 {
		t.Errorf("artifacts dir holds %d entries, want only the failing test's zip", len(entries))
	}

	// Kept stores of two other runs: RUN2 begins with RUN.
	var others []*larder.Store
	for _, label := range []string{run + "2/sample/TestFails/deliberately", "other-run/sample/TestFails/deliberately"} {
		other := newStore(t, larder.StoreOptions{Template: "gallery", Label: label})
		if err := other.Keep(tctx); err != nil {
			t.Fatal(err)
		}
		others = append(others, other)
	}
	if deleted := deleteStores(t, url.Values{"label_prefix": {run + "/"}}); deleted != 1 {
		t.Errorf("DELETE /stores?label_prefix=%s/ deleted %d stores, want the run's one kept store", run, deleted)
	}
	if _, err := client.GetStore(tctx, failed); !larder.IsNotFound(err) {
		t.Errorf("the run's kept store %s after DELETE /stores?label_prefix=%s/: %v, want 404", failed, run, err)
	}
	for _, other := range others {
		if _, err := client.GetStore(tctx, other.ID); err != nil {
			t.Errorf("the kept store %s of another run (%s): %v, want it still there", other.ID, other.Info.Label, err)
		}
	}
}

// deleteStores sends DELETE /stores with query to this server, as one
// removes a run's stores (curl -X DELETE "$LARDER_URL/stores?label_prefix=$RUN/"),
// and answers how many it deleted.
func deleteStores(t *testing.T, query url.Values) int {
	t.Helper()
	req, err := http.NewRequestWithContext(testenv.Context(t), http.MethodDelete, larder.FromEnvironment().URL+"/stores?"+query.Encode(), nil)
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
		Deleted *int `json:"deleted"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &answer) != nil || answer.Deleted == nil {
		t.Fatalf("DELETE /stores?%s: %s %s, want 200 {\"deleted\": n}", query.Encode(), resp.Status, body)
	}
	return *answer.Deleted
}

// runSampleModule runs `go test -v` on testdata/NAME (a module of its own)
// against this server, with env added to this process's environment
// without the run prefix's variables; answers its output and how it ended.
// Skips the test when there is no go tool on PATH.
func runSampleModule(t *testing.T, name string, env ...string) (string, error) {
	t.Helper()
	env = append(append(withoutRunVariables(os.Environ()), "LARDER_URL="+larder.FromEnvironment().URL), env...)
	return testenv.Go(t, filepath.Join("testdata", name), env, "test", "-count=1", "-v", ".")
}

// withoutRunVariables is env without the variables a run prefix comes from
// (runVariables), so that a sample's labels are the same in CI.
func withoutRunVariables(env []string) []string {
	var kept []string
	for _, e := range env {
		name, _, _ := strings.Cut(e, "=")
		run := false
		for _, v := range runVariables {
			if name == v[0] || (v[1] != "" && name == v[1]) {
				run = true
			}
		}
		if !run {
			kept = append(kept, e)
		}
	}
	return kept
}
