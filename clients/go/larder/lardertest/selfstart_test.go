package lardertest

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/larder-dev/larder/clients/go/internal/testenv"
)

// The test helpers' own server: without LARDER_URL they run `larder up`
// (clients/README.md, "Where a test helper's server comes from"). These
// tests run `go test` on a copy of testdata/selfstart (two packages, a
// fixtures/ folder at the module's top) with LARDER_URL unset and a private
// TMPDIR, and look at what its tests recorded and at what is left after.

// TestStoreForTestStartsAServer runs `go test -p 1 ./...` on the selfstart
// sample with LARDER_BINARY and no LARDER_URL: each test gets a store from
// one server that both packages share, although they run one after another
// with a pause between them, labelled PACKAGE/TEST (the two packages' tests
// TestNamedAlike get two labels); the failing test's store is kept (a later test
// of its package finds it) and its artifact saved, the passing test's is
// deleted; and within a few seconds of `go test` returning, the server is
// gone and its folder under TMPDIR removed.
func TestStoreForTestStartsAServer(t *testing.T) {
	binary := os.Getenv("LARDER_BINARY")
	if binary == "" {
		t.Skip("LARDER_BINARY is not set")
	}
	module := selfstartModule(t)
	tmp := filepath.Join(t.TempDir(), "tmp")
	out := filepath.Join(t.TempDir(), "out")
	artifacts := filepath.Join(t.TempDir(), "artifacts")
	for _, d := range []string{tmp, out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := append(sampleEnv(), "LARDER_BINARY="+binary, "TMPDIR="+tmp, "SAMPLE_OUT="+out,
		"SAMPLE_GAP_MS=2500", "LARDER_ARTIFACTS="+artifacts)
	start := time.Now()
	output, err := testenv.Go(t, module, env, "test", "-count=1", "-p", "1", "-v", "./...")
	returned := time.Now()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("go test of the sample: %v, want exit status 1 (one test fails); output:\n%s", err, output)
	}
	for _, want := range []string{
		"--- PASS: TestPasses", "--- PASS: TestThePassedStoreIsDeleted",
		"--- FAIL: TestFails", "this test fails on purpose", "--- PASS: TestTheFailedStoreIsKept",
	} {
		if !strings.Contains(output, want) {
			t.Errorf("output lacks %q:\n%s", want, output)
		}
	}

	records := map[string]selfstartRecord{}
	for _, name := range []string{"one-TestPasses", "two-TestFails", "one-TestNamedAlike", "two-TestNamedAlike"} {
		data, err := os.ReadFile(filepath.Join(out, name+".json"))
		if err != nil {
			t.Fatalf("%s got no store: %v; output:\n%s", name, err, output)
		}
		var r selfstartRecord
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatal(err)
		}
		records[name] = r
	}
	// Labelled PACKAGE/TEST (no run prefix here) by the package of the
	// test, although the sample's own helper in selfstart/record calls
	// StoreForTest: tests of one name in two packages are told apart.
	for name, want := range map[string]string{
		"one-TestPasses":     "selfstart/one/TestPasses",
		"two-TestFails":      "selfstart/two/TestFails",
		"one-TestNamedAlike": "selfstart/one/TestNamedAlike",
		"two-TestNamedAlike": "selfstart/two/TestNamedAlike",
	} {
		if got := records[name].Label; got != want {
			t.Errorf("%s's store is labelled %q, want %q", name, got, want)
		}
	}
	one, two := records["one-TestPasses"], records["two-TestFails"]
	t.Logf("go test start to the first store: %v; StoreForTest with `larder up` took %d ms (one) and %d ms (two)",
		time.Unix(0, minInt64(one.ReadyAt, two.ReadyAt)).Sub(start).Round(time.Millisecond), one.TookMS, two.TookMS)
	if one.URL != two.URL || one.StartedAt != two.StartedAt {
		t.Errorf("the packages used two servers: %s (started %s) and %s (started %s)", one.URL, one.StartedAt, two.URL, two.StartedAt)
	}
	if one.PID == two.PID || one.PPID != two.PPID {
		t.Errorf("pids %d and %d, parents %d and %d: want two test processes of one go command", one.PID, two.PID, one.PPID, two.PPID)
	}
	if one.URL == os.Getenv("LARDER_URL") {
		t.Errorf("the sample used this test's server %s", one.URL)
	}
	// The server keeps its stores in ${TMPDIR}/larder-UID/KEY/.
	shared := filepath.Join(tmp, "larder-"+strconv.Itoa(os.Getuid()))
	for _, r := range records {
		if !strings.HasPrefix(r.Path, shared+string(filepath.Separator)) {
			t.Errorf("%s's store is at %s, not under %s", r.Test, r.Path, shared)
		}
	}

	zip := filepath.Join(artifacts, "TestFails-"+two.ID+".zip")
	if manifest := testenv.ReadZip(t, zip); manifest["id"] != two.ID {
		t.Errorf("the artifact's manifest id %v, want %s", manifest["id"], two.ID)
	}
	if !strings.Contains(output, "store "+two.ID+" of the failed test is kept; artifact saved to "+zip) {
		t.Errorf("the test log does not tell where the artifact is (%s):\n%s", zip, output)
	}

	// Gone within ~3 s of the run's end: stopped a second after the last
	// process it serves ended, its folder removed.
	var left []string
	for {
		left = leftOf(one.URL, shared)
		if len(left) == 0 {
			t.Logf("the server was gone and its folder removed %v after go test returned", time.Since(returned).Round(10*time.Millisecond))
			break
		}
		if time.Since(returned) > 4*time.Second {
			t.Fatalf("4 s after go test returned: %s", strings.Join(left, "; "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTestHelpersWithoutAServer: with no URL and no binary (LARDER_BINARY
// unset, no larder on PATH) StoreForTest fails the test with the one
// sentence naming both ways out; a `larder up` that fails (here, the
// TestServer options' binary with a fixtures folder that does not exist)
// fails it with what `larder up` said.
func TestTestHelpersWithoutAServer(t *testing.T) {
	module := selfstartModule(t)
	env := append(sampleEnv(), "TMPDIR="+t.TempDir())
	for i, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			env[i] = "PATH=" + pathWithoutLarder(strings.TrimPrefix(e, "PATH="))
		}
	}
	output, err := testenv.Go(t, module, env, "test", "-count=1", "-v", "-run", "TestPasses", "./one")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("go test of the sample: %v, want exit status 1; output:\n%s", err, output)
	}
	if !regexp.MustCompile(`(?m)^\s+one_test\.go:\d+: ` + regexp.QuoteMeta(noServer) + `\n\s*--- FAIL: TestPasses`).MatchString(output) {
		t.Errorf("no test failed with %q alone:\n%s", noServer, output)
	}

	binary := os.Getenv("LARDER_BINARY")
	if binary == "" {
		return
	}
	missing := filepath.Join(t.TempDir(), "no-such-fixtures")
	output, err = testenv.Go(t, module, append(env, "SAMPLE_BINARY="+binary, "SAMPLE_FIXTURES="+missing),
		"test", "-count=1", "-v", "-run", "TestPasses", "./one")
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("go test of the sample: %v, want exit status 1; output:\n%s", err, output)
	}
	for _, want := range []string{"larder: starting a server with `" + binary + " up --for ", "--fixtures " + missing + "` failed (exit status 2):", missing + " does not exist"} {
		if !strings.Contains(output, want) {
			t.Errorf("output lacks %q:\n%s", want, output)
		}
	}
}

// selfstartRecord is what a test of the selfstart sample writes about its
// store (the sample's record.Store).
type selfstartRecord struct {
	Test      string `json:"test"`
	URL       string `json:"url"`
	StartedAt string `json:"started_at"`
	ID        string `json:"id"`
	Label     string `json:"label"`
	Path      string `json:"path"`
	PID       int    `json:"pid"`
	PPID      int    `json:"ppid"`
	ReadyAt   int64  `json:"ready_at_unix_ns"`
	TookMS    int64  `json:"took_ms"`
}

// selfstartModule is sampleModule(t, "selfstart").
func selfstartModule(t *testing.T) string {
	t.Helper()
	return sampleModule(t, "selfstart")
}

// sampleModule copies testdata/NAME into a temporary folder, its go.mod
// replacing this module by its folder, with the repository's
// fixtures/gallery as its fixtures/gallery; answers the copy's folder.
func sampleModule(t *testing.T, name string) string {
	t.Helper()
	here, err := testenv.ModuleDir()
	if err != nil {
		t.Fatal(err)
	}
	fixtures, err := testenv.FixturesDir()
	if err != nil {
		t.Fatal(err)
	}
	module := filepath.Join(t.TempDir(), name)
	if err := copyTree(filepath.Join("testdata", name), module); err != nil {
		t.Fatal(err)
	}
	if err := copyTree(filepath.Join(fixtures, "gallery"), filepath.Join(module, "fixtures", "gallery")); err != nil {
		t.Fatal(err)
	}
	goMod := filepath.Join(module, "go.mod")
	data, err := os.ReadFile(goMod)
	if err != nil {
		t.Fatal(err)
	}
	replaced := strings.Replace(string(data), "=> ../../../..", "=> "+here, 1)
	if replaced == string(data) {
		t.Fatalf("testdata/%s/go.mod has no `=> ../../../..` replace", name)
	}
	if err := os.WriteFile(goMod, []byte(replaced), 0o644); err != nil {
		t.Fatal(err)
	}
	return module
}

// copyTree copies the files of the folder from into the folder to.
func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		target := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}

// sampleEnv is this process's environment without any LARDER_ variable,
// TMPDIR, or variable a run prefix comes from.
func sampleEnv() []string {
	var env []string
	for _, e := range withoutRunVariables(os.Environ()) {
		if !strings.HasPrefix(e, "LARDER_") && !strings.HasPrefix(e, "TMPDIR=") {
			env = append(env, e)
		}
	}
	return env
}

// pathWithoutLarder is the PATH list without the folders that hold a larder.
func pathWithoutLarder(list string) string {
	var kept []string
	for _, dir := range filepath.SplitList(list) {
		if _, err := os.Stat(filepath.Join(dir, "larder")); err != nil {
			kept = append(kept, dir)
		}
	}
	return strings.Join(kept, string(filepath.ListSeparator))
}

// leftOf says what is left of the server at url whose shared folder is dir:
// nothing once it no longer answers and dir holds no server's folder.
func leftOf(url, dir string) []string {
	var left []string
	hc := &http.Client{Timeout: time.Second}
	if resp, err := hc.Get(url + "/health"); err == nil {
		resp.Body.Close()
		left = append(left, "the server at "+url+" still answers")
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		left = append(left, dir+" still holds "+strings.Join(names, ", "))
	}
	return left
}

func minInt64(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}
