// Package ahead is a sample whose TestMain calls lardertest.Main, so that
// StoreForTest works ahead of its tests: ahead_run_test.go (in the package
// above) runs `go test -v` on a copy of it, with LARDER_URL and with a
// server the helpers start, and looks at what its tests logged (SAMPLE
// lines) and at what the server has left. The tests run in the order they
// are written, each waiting for events with a deadline, never for a while.
package ahead

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/larder-dev/larder/clients/go/larder"
	"github.com/larder-dev/larder/clients/go/larder/lardertest"
)

func TestMain(m *testing.M) {
	code := lardertest.Main(m)
	// Main has ended: what the server still has of this run (a server the
	// helpers started runs while this process does).
	if out := os.Getenv("SAMPLE_OUT"); out != "" {
		client, err := lardertest.TestClient()
		if err != nil {
			panic(err)
		}
		data, err := json.Marshal(list(client.URL, url.Values{"label_prefix": {os.Getenv("LARDER_RUN") + "/"}}))
		if err != nil {
			panic(err)
		}
		if err := os.WriteFile(filepath.Join(out, "left.json"), data, 0o644); err != nil {
			panic(err)
		}
	}
	os.Exit(code)
}

var (
	oneFixture  = larder.StoreOptions{Template: "gallery", Fixtures: []string{"artists"}}
	twoFixtures = larder.StoreOptions{Template: "gallery", Fixtures: []string{"artists", "artworks"}}
	first       *larder.Store // TestA's
	madeAhead   string        // the store made ahead while TestA ran
)

// list is GET /stores?query at url, as any client sees it (not through
// lardertest, which would wait for its own work first).
func list(url string, query url.Values) []larder.StoreInfo {
	resp, err := http.Get(url + "/stores?" + query.Encode())
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var answer struct {
		Stores []larder.StoreInfo `json:"stores"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		panic(err)
	}
	return answer.Stores
}

// waitListed waits, up to 30 s, until the server lists a store labelled label.
func waitListed(t *testing.T, store *larder.Store, label string) larder.StoreInfo {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if found := list(store.Client().URL, url.Values{"label": {label}}); len(found) > 0 {
			return found[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s on, the server lists no store labelled %q", label)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func count(t *testing.T, store *larder.Store, sql string) int64 {
	t.Helper()
	result, err := store.Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	return result.Rows[0][0].(int64)
}

func TestA_Writes(t *testing.T) {
	first = lardertest.StoreForTest(t, oneFixture)
	if _, err := first.Query(context.Background(), "INSERT INTO artists (name) VALUES ('Written by A')"); err != nil {
		t.Fatal(err)
	}
	// The next store is made while this test runs, under a provisional label: RUN/PACKAGE/(made ahead).
	label := strings.TrimSuffix(lardertest.TestLabel(t), t.Name()) + "(made ahead)"
	madeAhead = waitListed(t, first, label).ID
	t.Logf("SAMPLE made ahead %s", madeAhead)
}

func TestB_GetsAFreshStore(t *testing.T) {
	store := lardertest.StoreForTest(t, oneFixture)
	if store.ID != madeAhead || store.ID == first.ID {
		t.Errorf("store %s, want %s, made ahead while TestA ran (TestA's: %s)", store.ID, madeAhead, first.ID)
	}
	if store.Info.Label != lardertest.TestLabel(t) {
		t.Errorf("Info.Label %q, want %q", store.Info.Label, lardertest.TestLabel(t))
	}
	// Fresh: the template and its fixture, nothing of TestA's.
	if n := count(t, store, "SELECT count(*) FROM artists"); n != 4 {
		t.Errorf("%d artists, want the fixture's 4", n)
	}
	if n := count(t, store, "SELECT count(*) FROM artists WHERE name = 'Written by A'"); n != 0 {
		t.Errorf("TestA's row is in TestB's store")
	}
	// A request about the store came after its label was set: the server has the test's.
	info, err := store.Refresh(context.Background())
	if err != nil || info.Label != lardertest.TestLabel(t) {
		t.Errorf("the server's label %q (%v), want %q", info.Label, err, lardertest.TestLabel(t))
	}
	// TestA's store is gone: TestClient waits for the deletes under way.
	client, err := lardertest.TestClient()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.GetStore(context.Background(), first.ID); !larder.IsNotFound(err) {
		t.Errorf("TestA's store %s: %v, want 404", first.ID, err)
	}
}

func TestC_IsLabelledInTheBackground(t *testing.T) {
	store := lardertest.StoreForTest(t, oneFixture)
	// No request about the store: its label becomes the test's by itself.
	if found := waitListed(t, store, lardertest.TestLabel(t)); found.ID != store.ID {
		t.Errorf("the store labelled %q is %s, not the test's %s", lardertest.TestLabel(t), found.ID, store.ID)
	}
}

// shortLived's stores live 2 s: one made ahead is handed out within 0.4 s only.
var shortLived = larder.StoreOptions{Template: "gallery", Fixtures: []string{"artists"}, TTLSeconds: 2}

var tooOld string // the store made ahead for TestC3, too old by then

func TestC2_LivesTwoSeconds(t *testing.T) {
	store := lardertest.StoreForTest(t, shortLived)
	label := strings.TrimSuffix(lardertest.TestLabel(t), t.Name()) + "(made ahead)"
	made := waitListed(t, store, label)
	tooOld = made.ID
	// Until the store made ahead is older than a fifth of its life: it only gets older.
	for time.Since(made.CreatedAt) < 600*time.Millisecond {
		time.Sleep(10 * time.Millisecond)
	}
}

func TestC3_GetsAStoreOfItsOwn(t *testing.T) {
	store := lardertest.StoreForTest(t, shortLived)
	if store.ID == tooOld {
		t.Errorf("got the store made ahead %s, older than a fifth of its 2 s", tooOld)
	}
}

func TestD_OtherOptions(t *testing.T) {
	// The store made ahead has one fixture: not this test's (deleted); this one is made now.
	store := lardertest.StoreForTest(t, twoFixtures)
	if n := count(t, store, "SELECT count(*) FROM artworks"); n != 12 {
		t.Errorf("%d artworks, want 12", n)
	}
}

func TestE_Fails(t *testing.T) {
	store := lardertest.StoreForTest(t, twoFixtures)
	t.Logf("SAMPLE_STORE %s %s", t.Name(), store.ID)
	if _, err := store.Query(context.Background(), "INSERT INTO artists (name) VALUES ('Left by E')"); err != nil {
		t.Fatal(err)
	}
	t.Error("this test fails on purpose")
}

func TestF_Last(t *testing.T) {
	store := lardertest.StoreForTest(t, twoFixtures)
	t.Logf("SAMPLE_STORE %s %s", t.Name(), store.ID)
	if out := os.Getenv("SAMPLE_REFUSE"); out != "" {
		// Ahead_run_test.go's proxy answers 500 to this store's DELETE.
		if err := os.WriteFile(filepath.Join(out, store.ID), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
