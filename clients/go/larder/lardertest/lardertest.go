// SPDX-License-Identifier: Apache-2.0

// Package lardertest gives each Go test its own Larder store, kept with its
// artifact when the test fails. It is larder's testing half, as httptest is
// net/http's, so that package larder itself does not import testing.
package lardertest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/larder-dev/larder/clients/go/internal/hook"
	"github.com/larder-dev/larder/clients/go/larder"
)

// testTimeout bounds each call StoreForTest makes (creating the store, and
// keeping, saving or deleting it afterwards).
const testTimeout = 2 * time.Minute

// defaultArtifactsDir is where StoreForTest saves artifacts when
// LARDER_ARTIFACTS is not set; artifactNameMax is the longest FileSafeName.
const (
	defaultArtifactsDir = "larder-artifacts"
	artifactNameMax     = 120
)

// StoreForTest gives the test t a fresh store made with opts on the server
// of TestClient: TestServer.URL or LARDER_URL when set, else one that
// `larder up` starts for this run (once per process), with the token
// LARDER_TOKEN. The store's label is TestLabel(t), RUN/PACKAGE/TEST (e.g.
// 123/github.com/acme/shop/orders/TestCheckout/empty_cart), unless
// opts.Label is set: then that, as it is. When there is no server, or the
// store cannot be made, the test stops with t.Fatal.
//
// When the test ends (t.Cleanup), a store of a test that passed (or was
// skipped) is deleted. A store of a test that failed is kept (PATCH keep) and
// its artifact is saved into the directory LARDER_ARTIFACTS (default
// "larder-artifacts", relative to the working directory, which under
// `go test` is the package's directory) as <test name>-<store id>.zip, the
// test name made file-name safe; t.Logf tells where.
//
// In remote mode (see larder.Client.ResolveMode: LARDER_MODE=remote,
// TestServer.Mode, or a LARDER_URL that is not on the loopback address) the
// store's Path is a local copy of it (Info.Path is the server's file), and
// the test ends so: a failed test's copy is checked in (Store.CheckIn)
// before the store is kept and its artifact saved, which then hold what the
// test wrote (a check-in that fails is logged, and the store kept as last
// checked in); a passing test's store is deleted with no upload. Either way
// the copy's folder is removed. Close the test's connections to Path before
// it ends (t.Cleanup functions registered after StoreForTest run first).
//
// In a test binary whose TestMain calls Main, the store may be one made
// while an earlier test ran, its label set in the background (Info.Label is
// the test's at once; every request about the store waits for it), and a
// passing test's store is deleted in the background: see Main.
func StoreForTest(t testing.TB, opts larder.StoreOptions) *larder.Store {
	t.Helper()
	pkg := testPackage()
	label := opts.Label
	if label == "" {
		label = testLabel(pkg, t.Name())
	}
	client, err := testClient()
	if err != nil {
		t.Fatal(err)
		return nil
	}
	reportFailures(t)
	var store *larder.Store
	var r *relabel // the label of a store made ahead, set in the background
	applies := aheadApplies(client, opts)
	key := ""
	if applies {
		key = aheadKey(client, opts)
		if store = takeReady(key); store != nil {
			store.Info.Label = label
			r = newRelabel(store, label)
		}
	}
	if store == nil {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		made := opts
		made.Label = label
		if store, err = client.CreateStore(ctx, made); err != nil {
			t.Fatalf("larder: creating a store for %s at %s: %v", t.Name(), client.URL, err)
			return nil
		}
	}
	if applies {
		prepare(client, opts, key, testLabel(pkg, aheadTest))
	}
	t.Cleanup(func() { finishTestStore(t, store, applies, r, label) })
	return store
}

// finishTestStore: a passing test's store deleted (in the background when
// Main works ahead: background), a failed one's kept and its artifact
// saved. r is the background label of a store made ahead, label the test's.
func finishTestStore(t testing.TB, store *larder.Store, background bool, r *relabel, label string) {
	if !t.Failed() && background {
		deleteInBackground(store, r, t.Name())
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if !t.Failed() {
		if err := store.Delete(ctx); err != nil && !larder.IsNotFound(err) {
			t.Logf("larder: deleting store %s: %v", store.ID, err)
		}
		return
	}
	defer func() {
		if err := store.Close(); err != nil {
			t.Logf("larder: %v", err)
		}
	}()
	if store.Remote() {
		if err := store.CheckIn(ctx); err != nil {
			t.Logf("larder: the failed test's local copy of store %s could not be checked in; the store is kept as last checked in: %v", store.ID, err)
		}
	}
	keep := store.Keep
	if r != nil {
		// Made ahead: the keep carries the test's label, whatever became of the one in the background.
		r.settle()
		keep = func(ctx context.Context) error {
			return hook.Patch(ctx, store, map[string]any{"keep": true, "label": label})
		}
	}
	if err := keep(ctx); err != nil {
		t.Logf("larder: keeping store %s of the failed test: %v", store.ID, err)
	}
	dir := os.Getenv("LARDER_ARTIFACTS")
	if dir == "" {
		dir = defaultArtifactsDir
	}
	path := filepath.Join(dir, FileSafeName(t.Name())+"-"+store.ID+".zip")
	if err := store.Artifact(ctx, path); err != nil {
		t.Logf("larder: store %s of the failed test is kept; saving its artifact to %s: %v", store.ID, path, err)
		return
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	t.Logf("larder: store %s of the failed test is kept; artifact saved to %s", store.ID, path)
}

// FileSafeName is name with every character other than ASCII letters,
// digits, '.', '-' and '_' replaced by '_' (a subtest's "/" included), and
// at most 120 bytes long, as StoreForTest names artifacts.
func FileSafeName(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := strings.Trim(b.String(), ".")
	if len(s) > artifactNameMax {
		s = s[:artifactNameMax]
	}
	if s == "" {
		s = "test"
	}
	return s
}
