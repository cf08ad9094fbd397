package larder

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestStoreForTestInASubprocess runs `go test` on testdata/sample, which has
// one passing and one failing test using StoreForTest, against this
// server: the failing test's store is kept and its artifact saved under
// LARDER_ARTIFACTS; the passing test's store is gone.
func TestStoreForTestInASubprocess(t *testing.T) {
	artifacts := filepath.Join(t.TempDir(), "artifacts")
	output, err := runSampleModule(t, "sample", "LARDER_ARTIFACTS="+artifacts)
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

	client := FromEnvironment()
	tctx := testContext(t)
	_, err = client.GetStore(tctx, passed)
	var e *Error
	if !errors.As(err, &e) || e.Status != 404 || e.Code != "store_not_found" {
		t.Errorf("the passing test's store %s: %v, want 404 store_not_found", passed, err)
	}

	kept, err := client.GetStore(tctx, failed)
	if err != nil {
		t.Fatalf("the failing test's store %s: %v", failed, err)
	}
	t.Cleanup(func() { _ = kept.Delete(testContext(t)) })
	if !kept.Info.Keep || kept.Info.Label != "TestFails/deliberately" {
		t.Errorf("the failing test's store: keep %v label %q, want keep true and its test's name", kept.Info.Keep, kept.Info.Label)
	}
	zipPath := filepath.Join(artifacts, "TestFails_deliberately-"+failed+".zip")
	if !strings.Contains(output, "artifact saved to "+zipPath) {
		t.Errorf("the test log does not tell where the artifact is (%s):\n%s", zipPath, output)
	}
	manifest := readZip(t, zipPath)
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
}

// runSampleModule runs `go test -v` on testdata/NAME (a module of its own)
// against this server, with env added; answers its output and how it ended.
// Skips the test when there is no go tool on PATH.
func runSampleModule(t *testing.T, name string, env ...string) (string, error) {
	t.Helper()
	env = append(append(os.Environ(), "LARDER_URL="+FromEnvironment().URL), env...)
	return runGo(t, filepath.Join("testdata", name), env, "test", "-count=1", "-v", ".")
}

// runGo runs the go tool with args in dir, offline, with the environment env
// (GOPROXY=off, GOFLAGS=-mod=mod and GOWORK=off added); answers its output
// and how it ended. Skips the test when there is no go tool on PATH.
func runGo(t *testing.T, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, args...)
	cmd.Dir = dir
	cmd.Env = append(append([]string{}, env...), "GOPROXY=off", "GOFLAGS=-mod=mod", "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err = cmd.Run()
	return out.String(), err
}
