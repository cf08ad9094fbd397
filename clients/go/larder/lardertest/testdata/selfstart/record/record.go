// Package record is the shared part of the selfstart sample's two packages:
// selfstart_test.go (in package lardertest) copies this module into a
// temporary folder with a fixtures/ folder at its top and runs
// `go test -p 1 ./...` on it without LARDER_URL, so that the test helpers
// start a server with `larder up`. Each test that gets a store writes what
// it saw to $SAMPLE_OUT/PACKAGE-TEST.json.
package record

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/larder-dev/larder/clients/go/larder"
	"github.com/larder-dev/larder/clients/go/larder/lardertest"
)

// Store is what a test writes about the store it got.
type Store struct {
	Package   string `json:"package"`
	Test      string `json:"test"`
	URL       string `json:"url"`        // the server the helpers used
	StartedAt string `json:"started_at"` // that server's /health started_at
	ID        string `json:"id"`
	Label     string `json:"label"` // the store's, as the server answered it
	Path      string `json:"path"`
	PID       int    `json:"pid"`
	PPID      int    `json:"ppid"`
	ReadyAt   int64  `json:"ready_at_unix_ns"` // when the store was there
	TookMS    int64  `json:"took_ms"`          // StoreForTest's time
}

// Setup applies SAMPLE_BINARY and SAMPLE_FIXTURES to lardertest.TestServer and,
// when a package of the run already wrote a record, waits SAMPLE_GAP_MS
// first: `go test -p 1` runs the packages one after another, so the server
// must outlive the first package's process, served for the go command too.
func Setup() {
	lardertest.TestServer.Binary = os.Getenv("SAMPLE_BINARY")
	lardertest.TestServer.Fixtures = os.Getenv("SAMPLE_FIXTURES")
	out := os.Getenv("SAMPLE_OUT")
	if out == "" {
		return
	}
	if others, _ := filepath.Glob(filepath.Join(out, "*.json")); len(others) > 0 {
		var ms int
		fmt.Sscan(os.Getenv("SAMPLE_GAP_MS"), &ms)
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
}

// StoreForTest is lardertest.StoreForTest that writes the record of the store.
// Called here, in package record, it labels the store with the package of
// the test (selfstart/one or selfstart/two), not this one.
func StoreForTest(t *testing.T, pkg string, opts larder.StoreOptions) *larder.Store {
	t.Helper()
	start := time.Now()
	store := lardertest.StoreForTest(t, opts)
	r := Store{Package: pkg, Test: t.Name(), ID: store.ID, Label: store.Info.Label, Path: store.Path,
		PID: os.Getpid(), PPID: os.Getppid(), ReadyAt: time.Now().UnixNano(), TookMS: time.Since(start).Milliseconds()}
	client, err := lardertest.TestClient()
	if err != nil {
		t.Fatal(err)
	}
	r.URL = client.URL
	resp, err := http.Get(client.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var health struct {
		StartedAt string `json:"started_at"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&health); err != nil {
		t.Fatal(err)
	}
	r.StartedAt = health.StartedAt
	if out := os.Getenv("SAMPLE_OUT"); out != "" {
		data, _ := json.Marshal(r)
		name := pkg + "-" + strings.ReplaceAll(t.Name(), "/", "_") + ".json"
		if err := os.WriteFile(filepath.Join(out, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return store
}
