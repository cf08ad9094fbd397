package lardertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/larder-dev/larder/clients/go/internal/testenv"
	"github.com/larder-dev/larder/clients/go/larder"
)

// Main's work ahead of the tests (issue 48): these tests run `go test -v`
// on a copy of testdata/ahead, whose TestMain calls Main, and look at what
// its tests logged and at what the server has left once it has ended.

// aheadRun is what a run of the ahead sample told.
type aheadRun struct {
	output string
	stores map[string]string // SAMPLE_STORE: test name → store id
	left   []larder.StoreInfo
}

// runAheadSample copies testdata/ahead (sampleModule) and runs `go test -count=1 -v .`
// in it with env added to this process's environment (without LARDER_,
// TMPDIR and the run prefix's variables) and SAMPLE_OUT; one test fails
// there on purpose.
func runAheadSample(t *testing.T, env ...string) aheadRun {
	t.Helper()
	module := sampleModule(t, "ahead")
	out := t.TempDir()
	env = append(append(sampleEnv(), "SAMPLE_OUT="+out, "TMPDIR="+t.TempDir()), env...)
	output, err := testenv.Go(t, module, env, "test", "-count=1", "-v", ".")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("go test of the sample: %v, want exit status 1 (one test fails); output:\n%s", err, output)
	}
	for _, test := range []string{"TestA_Writes", "TestB_GetsAFreshStore", "TestC_IsLabelledInTheBackground", "TestC2_LivesTwoSeconds",
		"TestC3_GetsAStoreOfItsOwn", "TestD_OtherOptions", "TestF_Last"} {
		if !strings.Contains(output, "--- PASS: "+test) {
			t.Errorf("%s did not pass:\n%s", test, output)
		}
	}
	if !strings.Contains(output, "--- FAIL: TestE_Fails") || !strings.Contains(output, "this test fails on purpose") {
		t.Errorf("TestE_Fails did not fail as it should:\n%s", output)
	}
	run := aheadRun{output: output, stores: map[string]string{}}
	for _, m := range regexp.MustCompile(`SAMPLE_STORE (\S+) (\S+)`).FindAllStringSubmatch(output, -1) {
		run.stores[m[1]] = m[2]
	}
	data, err := os.ReadFile(filepath.Join(out, "left.json"))
	if err != nil {
		t.Fatalf("the sample's TestMain wrote nothing: %v\n%s", err, output)
	}
	if err := json.Unmarshal(data, &run.left); err != nil {
		t.Fatal(err)
	}
	return run
}

// checkKeptAlone: once the sample's Main had ended, the server had nothing
// of the run but TestE_Fails's store, kept with its label; its artifact is
// saved with what the test wrote.
func checkKeptAlone(t *testing.T, run aheadRun, prefix, artifacts string) {
	t.Helper()
	failed := run.stores["TestE_Fails"]
	if len(run.left) != 1 || run.left[0].ID != failed || !run.left[0].Keep || run.left[0].Label != prefix+"ahead/TestE_Fails" {
		t.Errorf("the server had %+v of the run once it had ended, want TestE_Fails's store %s alone, kept, labelled %q\n%s",
			run.left, failed, prefix+"ahead/TestE_Fails", run.output)
	}
	zip := filepath.Join(artifacts, "TestE_Fails-"+failed+".zip")
	if manifest := testenv.ReadZip(t, zip); manifest["id"] != failed || manifest["label"] != prefix+"ahead/TestE_Fails" {
		t.Errorf("the artifact's manifest: id %v label %v, want %s and %q", manifest["id"], manifest["label"], failed, prefix+"ahead/TestE_Fails")
	} else if counts, _ := manifest["counts"].(map[string]any); counts["artists"] != 5.0 {
		t.Errorf("the artifact's counts %v, want the 5 artists the test left", manifest["counts"])
	}
}

// TestMainWithLarderURL: against this server, as a run with a prefix.
func TestMainWithLarderURL(t *testing.T) {
	artifacts := filepath.Join(t.TempDir(), "artifacts")
	run := fmt.Sprintf("ahead-%d", time.Now().UnixNano())
	result := runAheadSample(t, "LARDER_URL="+larder.FromEnvironment().URL, "LARDER_RUN="+run, "LARDER_ARTIFACTS="+artifacts)
	checkKeptAlone(t, result, run+"/", artifacts)
	if deleted := deleteStores(t, url.Values{"label_prefix": {run + "/"}}); deleted != 1 {
		t.Errorf("the run left %d stores, want TestE_Fails's alone", deleted)
	}
}

// TestMainSelfStarted: with the server the helpers start (`larder up`).
func TestMainSelfStarted(t *testing.T) {
	binary := os.Getenv("LARDER_BINARY")
	if binary == "" {
		t.Skip("LARDER_BINARY is not set")
	}
	artifacts := filepath.Join(t.TempDir(), "artifacts")
	result := runAheadSample(t, "LARDER_BINARY="+binary, "LARDER_RUN=self", "LARDER_ARTIFACTS="+artifacts)
	checkKeptAlone(t, result, "self/", artifacts)
}

// TestMainReportsAFailedBackgroundDelete: a proxy in front of this server
// answers 500 to the DELETE of TestF_Last's store, which Main waits for
// once the tests have run: it says so on standard error, naming the store,
// the test and the server's answer; the test still passed, as a test whose
// store's delete failed always did.
func TestMainReportsAFailedBackgroundDelete(t *testing.T) {
	upstream, err := url.Parse(larder.FromEnvironment().URL)
	if err != nil {
		t.Fatal(err)
	}
	refuse := t.TempDir()
	var refused atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := strings.TrimPrefix(r.URL.Path, "/stores/"); r.Method == http.MethodDelete && id != r.URL.Path {
			if _, err := os.Stat(filepath.Join(refuse, id)); err == nil {
				refused.Add(1)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusInternalServerError)
				io.WriteString(w, `{"error": {"code": "internal", "message": "the proxy refused it", "details": {}}}`)
				return
			}
		}
		forward(t, upstream, w, r)
	}))
	defer proxy.Close()
	run := fmt.Sprintf("refused-%d", time.Now().UnixNano())
	result := runAheadSample(t, "LARDER_URL="+proxy.URL, "LARDER_RUN="+run, "LARDER_ARTIFACTS="+t.TempDir(), "SAMPLE_REFUSE="+refuse)
	last := result.stores["TestF_Last"]
	if refused.Load() != 1 {
		t.Errorf("the proxy refused %d deletes, want TestF_Last's one", refused.Load())
	}
	want := "deleting store " + last + " (of TestF_Last, which passed): larder: 500 internal: the proxy refused it"
	if !strings.Contains(result.output, want) {
		t.Errorf("the output does not say %q:\n%s", want, result.output)
	}
	if deleted := deleteStores(t, url.Values{"label_prefix": {run + "/"}}); deleted != 2 {
		t.Errorf("the run left %d stores, want TestE_Fails's and the refused one", deleted)
	}
}

// forward sends r on to upstream and copies its answer to w.
func forward(t *testing.T, upstream *url.URL, w http.ResponseWriter, r *http.Request) {
	target := *upstream
	target.Path, target.RawQuery = r.URL.Path, r.URL.RawQuery
	req, err := http.NewRequestWithContext(r.Context(), r.Method, target.String(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.ContentLength = r.ContentLength
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}
