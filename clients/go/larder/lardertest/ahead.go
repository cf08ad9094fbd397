// SPDX-License-Identifier: Apache-2.0

package lardertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/larder-dev/larder/clients/go/internal/hook"
	"github.com/larder-dev/larder/clients/go/larder"
)

// What StoreForTest does off a test's critical path (issue 48) in a test
// binary whose TestMain calls Main: the next stores of the same options
// (aheadDepth) are made while the current test runs, and a passing test's
// store is deleted while the next one runs. Main's end, before the process exits (and so
// before a server `larder up` started for it can go), deletes the store
// made ahead that no test took and waits for every request.

const (
	// readyMaxAge: a store made ahead is handed out only this young (the
	// server's default ttl is 300 s, a user's may be shorter); an older one
	// is deleted and the test's store made anew.
	readyMaxAge = 60 * time.Second
	// aheadDepth: how many stores are made ahead once a test has taken one
	// (before, and after a test that found none for its options, one). A
	// Go test is short (a subtest writing a row: half a millisecond),
	// shorter than a store's making while the test uses the other core:
	// with one store ahead the next test still waited for it, measured;
	// with two it did not.
	aheadDepth = 2
	// maxPendingDeletes: at most this many deletes under way; one more waits.
	maxPendingDeletes = 4
	// settleTimeout bounds how long Main's end waits for what is under way.
	settleTimeout = time.Minute
	// relabelDelay: a store made ahead carries a provisional label until
	// its test's is set, this long after it was handed out, or at once when
	// the test (or TestClient) makes a request about it, or with the keep of
	// a failed test; a passing test that ends sooner is deleted without.
	relabelDelay = 20 * time.Millisecond
	// aheadTest is the TEST part of a provisional label: RUN/PACKAGE/aheadTest.
	aheadTest = "(made ahead)"
)

// ahead is the process's state; its zero value is off (no Main).
var ahead struct {
	mu       sync.Mutex
	on       bool
	ready    []*readyStore     // at most aheadDepth, oldest first
	depth    int               // how many to make ahead now: 1, or aheadDepth after a hit
	relabels map[*relabel]bool // not yet settled
	failures []string          // not yet reported
	deletes  chan struct{}     // a slot per delete under way
	work     sync.WaitGroup    // every background request
}

// Main is a TestMain's body that lets StoreForTest work ahead of the tests:
//
//	func TestMain(m *testing.M) { os.Exit(lardertest.Main(m)) }
//
// While the tests run, each test's store (of a local server, made with
// options other than From) is followed by two stores made with the same
// options for the next tests that ask for them, made while the current test
// runs; each is handed out with a provisional label (RUN/PACKAGE/(made
// ahead)), which becomes the test's own in the background, before any
// request the test makes about the store (see TestLabel). A passing test's
// store is deleted in the background, at most 4 at a time; what a failed
// test's store goes through (kept, its artifact saved) is as without Main.
// TestClient waits for the deletes under way, so that a test sees earlier
// tests' stores gone. A delete that failed is logged (t.Logf) by the next
// test that calls StoreForTest, as a failed delete always was, or, when no
// test comes, written to standard error by Main.
//
// When the tests have run, Main deletes the store made ahead that no test
// took and waits, up to a minute, for every request under way, then answers
// m.Run's exit code. Without Main, StoreForTest makes and deletes each
// store while its test waits, as it always did.
func Main(m *testing.M) int {
	ahead.mu.Lock()
	ahead.on = true
	ahead.relabels = map[*relabel]bool{}
	ahead.deletes = make(chan struct{}, maxPendingDeletes)
	ahead.mu.Unlock()
	code := m.Run()
	if failures := finishAhead(settleTimeout); len(failures) > 0 {
		fmt.Fprintf(os.Stderr, "larder: requests made in the background failed:\n  %s\n", strings.Join(failures, "\n  "))
	}
	return code
}

// finishAhead is Main's end: the work ahead stops, the store made ahead is
// deleted, and every request under way waited for up to timeout; answers
// the failures not yet reported.
func finishAhead(timeout time.Duration) []string {
	ahead.mu.Lock()
	ahead.on = false
	ready := ahead.ready
	ahead.ready = nil
	ahead.mu.Unlock()
	for _, r := range ready {
		discard(r)
	}
	done := make(chan struct{})
	go func() { ahead.work.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		noteFailure(fmt.Sprintf("requests made in the background were still unanswered %v after the tests ended", timeout))
	}
	return takeFailures()
}

// readyStore is a store asked for ahead: done closes when the answer came.
type readyStore struct {
	key       string // the options it was made with, but the label, and the server
	requested time.Time
	done      chan struct{}
	store     *larder.Store
	err       error
}

// aheadKey is what a store made ahead must match to be handed out: the
// server, token and mode of the client and every option but the label.
func aheadKey(client *larder.Client, opts larder.StoreOptions) string {
	opts.Label = ""
	data, _ := json.Marshal(struct {
		URL, Token string
		Mode       larder.Mode
		Options    larder.StoreOptions
	}{client.URL, client.Token, client.Mode, opts})
	return string(data)
}

// aheadApplies is whether a store of client with opts may be made ahead:
// Main is on, the client is in local mode and the store is no fork.
func aheadApplies(client *larder.Client, opts larder.StoreOptions) bool {
	ahead.mu.Lock()
	on := ahead.on
	ahead.mu.Unlock()
	if !on || opts.From != "" {
		return false
	}
	mode, err := client.ResolveMode()
	return err == nil && mode == larder.ModeLocal
}

// takeReady is the oldest store made ahead that matches key and is young
// enough, waiting for its answer; nil when there is none (those before it
// that do not match are deleted in the background), or when making it
// failed (the caller makes the test's store itself and meets the error
// itself).
func takeReady(key string) *larder.Store {
	ahead.mu.Lock()
	var ready *readyStore
	for len(ahead.ready) > 0 && ready == nil {
		r := ahead.ready[0]
		ahead.ready = ahead.ready[1:]
		if r.key != key || time.Since(r.requested) > readyMaxAge {
			discard(r)
			continue
		}
		ready = r
	}
	ahead.depth = 1
	if ready != nil {
		ahead.depth = aheadDepth
	}
	ahead.mu.Unlock()
	if ready == nil {
		return nil
	}
	<-ready.done
	if ready.err != nil {
		return nil
	}
	// Well within its own time to live too (TTLSeconds, or a server's short --ttl-seconds).
	info := ready.store.Info
	if lifetime := info.ExpiresAt.Sub(info.CreatedAt); lifetime > 0 && time.Since(ready.requested) > lifetime/5 {
		discard(ready)
		return nil
	}
	return ready.store
}

// prepare asks for stores made with opts (their label provisional) for the
// next tests, ahead.depth of them in all with those under way.
func prepare(client *larder.Client, opts larder.StoreOptions, key, provisional string) {
	ahead.mu.Lock()
	defer ahead.mu.Unlock()
	if !ahead.on {
		return
	}
	opts.Label = provisional
	for len(ahead.ready) < ahead.depth {
		ready := &readyStore{key: key, requested: time.Now(), done: make(chan struct{})}
		ahead.ready = append(ahead.ready, ready)
		ahead.work.Add(1)
		go func() {
			defer ahead.work.Done()
			defer close(ready.done)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			ready.store, ready.err = createStore(ctx, client, opts)
		}()
	}
}

// createStore is client.CreateStore(ctx, opts), raw when it can be (wire.go).
func createStore(ctx context.Context, client *larder.Client, opts larder.StoreOptions) (*larder.Store, error) {
	if _, _, _, ok := rawServer(client); !ok {
		return client.CreateStore(ctx, opts)
	}
	body, err := json.Marshal(hook.StoreBody(opts))
	if err != nil {
		return nil, err
	}
	status, data, err := rawCall(ctx, client, http.MethodPost, "/stores", body)
	if err != nil {
		return nil, err
	}
	if status != http.StatusCreated {
		return nil, answerError(status, data)
	}
	store, err := hook.NewStore(client, data)
	if err != nil {
		return nil, err
	}
	return store.(*larder.Store), nil
}

// discard deletes, in the background, a store made ahead that no test takes.
func discard(ready *readyStore) {
	ahead.work.Add(1)
	go func() {
		defer ahead.work.Done()
		<-ready.done
		if ready.err == nil {
			deleteStore(ready.store, "made ahead and not taken")
		}
	}()
}

// deleteInBackground deletes the store of a test that passed, at most
// maxPendingDeletes at a time (the caller waits for a slot), after its
// label if that is still under way (or instead of it, if not begun).
func deleteInBackground(store *larder.Store, r *relabel, test string) {
	ahead.deletes <- struct{}{}
	ahead.work.Add(1)
	go func() {
		defer ahead.work.Done()
		defer func() { <-ahead.deletes }()
		if r != nil {
			r.cancel()
		}
		deleteStore(store, "of "+test+", which passed")
	}()
}

func deleteStore(store *larder.Store, whose string) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var err error
	if _, _, _, ok := rawServer(store.Client()); ok && !store.Remote() {
		var status int
		var data []byte
		if status, data, err = rawCall(ctx, store.Client(), http.MethodDelete, "/stores/"+url.PathEscape(store.ID), nil); err == nil && status/100 != 2 {
			err = answerError(status, data)
		}
	} else {
		err = store.Delete(ctx)
	}
	if err != nil && !larder.IsNotFound(err) {
		noteFailure(fmt.Sprintf("deleting store %s (%s): %v", store.ID, whose, err))
	}
}

// settleAhead waits for every delete under way and sets every label still
// provisional (TestClient's: what it answers about is as the tests left it).
func settleAhead() {
	ahead.mu.Lock()
	on := ahead.on
	var pending []*relabel
	for r := range ahead.relabels {
		pending = append(pending, r)
	}
	deletes := ahead.deletes
	ahead.mu.Unlock()
	if !on {
		return
	}
	for _, r := range pending {
		r.settle()
	}
	// Every slot taken and given back: each delete under way has ended.
	for i := 0; i < cap(deletes); i++ {
		deletes <- struct{}{}
	}
	for i := 0; i < cap(deletes); i++ {
		<-deletes
	}
}

func noteFailure(line string) {
	ahead.mu.Lock()
	ahead.failures = append(ahead.failures, line)
	ahead.mu.Unlock()
}

func takeFailures() []string {
	ahead.mu.Lock()
	defer ahead.mu.Unlock()
	failures := ahead.failures
	ahead.failures = nil
	return failures
}

// reportFailures logs, in t, what failed in the background before.
func reportFailures(t testing.TB) {
	for _, line := range takeFailures() {
		t.Logf("larder: in the background, earlier: %s", line)
	}
}

// relabel gives a store made ahead its test's label: after relabelDelay,
// or at once when a request about the store (settle) or the failed test's
// keep needs it; never, for a passing test whose store is deleted first.
type relabel struct {
	store *larder.Store
	label string
	once  sync.Once
	timer *time.Timer
	done  chan struct{}
	err   error
}

func newRelabel(store *larder.Store, label string) *relabel {
	r := &relabel{store: store, label: label, done: make(chan struct{})}
	ahead.work.Add(1)
	r.timer = time.AfterFunc(relabelDelay, func() { r.run(true) })
	ahead.mu.Lock()
	ahead.relabels[r] = true
	ahead.mu.Unlock()
	hook.Settle(store, r.settle)
	return r
}

// run sets the label (patch), or marks it not needed, once; then waits.
func (r *relabel) run(patch bool) {
	r.once.Do(func() {
		defer ahead.work.Done()
		defer close(r.done)
		ahead.mu.Lock()
		delete(ahead.relabels, r)
		ahead.mu.Unlock()
		if !patch {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		r.err = hook.Patch(ctx, r.store, map[string]any{"label": r.label})
		if r.err != nil && !larder.IsNotFound(r.err) { // a store the test deleted itself has no label to set
			noteFailure(fmt.Sprintf("labelling store %s %q: %v", r.store.ID, r.label, r.err))
		}
	})
	<-r.done
}

// settle sets the label now, if it is not set yet, and waits for it.
func (r *relabel) settle() {
	r.timer.Stop()
	r.run(true)
}

// cancel: the store is going; its label is not needed unless under way.
func (r *relabel) cancel() {
	r.timer.Stop()
	r.run(false)
}
