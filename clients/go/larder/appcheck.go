// SPDX-License-Identifier: Apache-2.0

package larder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Checking old databases that the application's own migrator migrates: the
// app does the migrating, the server the judging (POST /stores/{id}/check).

// UploadOptions tune Upload. Every field is optional.
type UploadOptions struct {
	// Label names the store in listings and on the dashboard.
	Label string
	// TTLSeconds, when positive, is the store's time to live.
	TTLSeconds int
}

// Upload makes a store of the SQLite database file at path, as it is (no
// template, not migrated): POST /stores with the file as the body
// (application/vnd.sqlite3). A file that is not a SQLite database is a
// *Error with status 400. At most one UploadOptions may be given. In remote
// mode the store is then downloaded into a local copy, as CreateStore does.
func (c *Client) Upload(ctx context.Context, path string, opts ...UploadOptions) (*Store, error) {
	var o UploadOptions
	for _, opt := range opts {
		o = opt
	}
	mode, err := c.ResolveMode()
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("larder: upload: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("larder: upload: %w", err)
	}
	q := url.Values{}
	if o.Label != "" {
		q.Set("label", o.Label)
	}
	if o.TTLSeconds > 0 {
		q.Set("ttl_seconds", strconv.Itoa(o.TTLSeconds))
	}
	body := rawBody{r: f, size: st.Size(), contentType: "application/vnd.sqlite3"}
	resp, err := c.sendWith(ctx, c.httpClient(0), http.MethodPost, "/stores", q, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var info StoreInfo
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return nil, fmt.Errorf("larder: POST /stores: decoding the answer: %w", err)
	}
	s := c.newStore(info)
	if mode == ModeRemote {
		if err := c.checkOutNew(ctx, s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Reference is what a migrated store must match: set exactly one of Build
// (the key of a ready app-built template, see Client.Build), Template (at
// Version; "latest" when empty) or Store (the id of a live store).
type Reference struct {
	Build    string
	Template string
	Version  string
	Store    string
}

func (r Reference) body() (map[string]any, error) {
	set := 0
	for _, v := range []string{r.Build, r.Template, r.Store} {
		if v != "" {
			set++
		}
	}
	if set != 1 || (r.Version != "" && r.Template == "") {
		return nil, errors.New("larder: a check's reference is exactly one of Reference{Build}, Reference{Template, Version} or Reference{Store}")
	}
	switch {
	case r.Build != "":
		return map[string]any{"build": r.Build}, nil
	case r.Store != "":
		return map[string]any{"store": r.Store}, nil
	case r.Version != "":
		return map[string]any{"template": r.Template, "version": r.Version}, nil
	}
	return map[string]any{"template": r.Template}, nil
}

// CheckOptions tune Check. Every field is optional.
type CheckOptions struct {
	// Snapshot is the name the result carries (e.g. "v1.sqlite").
	Snapshot string
	// Expect is the .expect.json shape: "version", "counts", "min_counts",
	// "assert" (SQL true after migrating), "before" (SQL true on the upload
	// as it arrived), "drops", "moves", "deletes".
	Expect map[string]any
	// SkipDataCheck sends "data": false: the rule that every table and
	// column that held data still holds it is not checked.
	SkipDataCheck bool
}

// CheckResult is the server's judgement of one store (a "result" of kind
// "app"). StoreID and Kept are CheckSnapshot's: the store it uploaded, and
// whether it was kept (it failed) rather than deleted. Raw holds the whole
// answer.
type CheckResult struct {
	Template    string         `json:"template"` // empty for an app's store
	Kind        string         `json:"kind"`
	Snapshot    string         `json:"snapshot"`
	FromVersion string         `json:"from_version"`
	ToVersion   string         `json:"to_version"`
	Passed      bool           `json:"passed"`
	MS          float64        `json:"ms"`
	Failures    []string       `json:"failures"`
	Notes       []string       `json:"notes"`
	StoreID     string         `json:"-"`
	Kept        bool           `json:"-"`
	Raw         map[string]any `json:"-"`
}

// String is the result as a test failure tells it: the snapshot and its
// versions, whether it passed, the store CheckSnapshot kept, then every
// failure on a line of its own.
func (r *CheckResult) String() string {
	name := r.Snapshot
	if name == "" {
		name = "store"
	}
	from, to := r.FromVersion, r.ToVersion
	if from == "" {
		from = "?"
	}
	if to == "" {
		to = "?"
	}
	head := fmt.Sprintf("%s (%s → %s)", name, from, to)
	if r.Passed {
		return head + " passed the migration check"
	}
	var b strings.Builder
	b.WriteString(head + " failed the migration check")
	if r.StoreID != "" {
		state := "deleted"
		if r.Kept {
			state = "kept"
		}
		fmt.Fprintf(&b, "; store %s is %s", r.StoreID, state)
	}
	b.WriteString(":")
	failures := r.Failures
	if len(failures) == 0 {
		failures = []string{"(the check failed without saying why)"}
	}
	for _, f := range failures {
		b.WriteString("\n    " + f)
	}
	return b.String()
}

// Check judges the store id, an upload that the application's own migrator
// migrated, against the reference (POST /stores/{id}/check): before on the
// upload as it arrived, integrity, no new foreign-key violations, the
// schema equal to the reference's, the data kept, the expectations. It
// returns the result whether the store passed (200) or failed (422). What
// cannot be judged is a *Error: 400 (code "bad_request", Details["reason"]
// "not_an_upload" for a store not uploaded), 404 ("unknown_build",
// "unknown_template", "unknown_version", "store_not_found"), 409 while the
// build is still building. At most one CheckOptions may be given.
func (c *Client) Check(ctx context.Context, id string, against Reference, opts ...CheckOptions) (*CheckResult, error) {
	var o CheckOptions
	for _, opt := range opts {
		o = opt
	}
	ref, err := against.body()
	if err != nil {
		return nil, err
	}
	body := map[string]any{"against": ref}
	if o.Snapshot != "" {
		body["snapshot"] = o.Snapshot
	}
	if o.Expect != nil {
		body["expect"] = o.Expect
	}
	if o.SkipDataCheck {
		body["data"] = false
	}
	path := "/stores/" + url.PathEscape(id) + "/check"
	resp, err := c.sendAllowing(ctx, c.httpClient(0), http.MethodPost, path, nil, body, http.StatusUnprocessableEntity)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("larder: POST %s: reading the answer: %w", path, err)
	}
	var r CheckResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("larder: POST %s: decoding the answer: %w", path, err)
	}
	_ = json.Unmarshal(raw, &r.Raw)
	if _, isError := r.Raw["error"]; isError {
		return nil, errorOf(resp, raw) // a 422 that is an error, not a result
	}
	return &r, nil
}

// Check judges this store against the reference: see Client.Check.
func (s *Store) Check(ctx context.Context, against Reference, opts ...CheckOptions) (*CheckResult, error) {
	if s.settle != nil {
		s.settle()
	}
	return s.client.Check(ctx, s.ID, against, opts...)
}

// SnapshotOptions say how CheckSnapshot checks an old database.
type SnapshotOptions struct {
	// Migrate is the application's own migrator: it opens the SQLite file
	// path (the uploaded store's; in remote mode its local copy), migrates
	// it, and closes its connections.
	// The same signature as Client.Build's migrate, so one function can
	// build the reference and migrate the snapshots. Required.
	Migrate func(ctx context.Context, path string) error
	// Against is what the migrated store must match; usually
	// Reference{Build: key} of a build the same Migrate made.
	Against Reference
	// Expect, when not nil, is the expectations; when nil, NAME.expect.json
	// beside NAME.sqlite is read, if there is one. Not for CheckSnapshots:
	// each snapshot has its own.
	Expect map[string]any
	// SkipDataCheck skips the data-kept rule (see CheckOptions).
	SkipDataCheck bool
	// Label labels the uploaded store; the file's name when empty. Not for
	// CheckSnapshots.
	Label string
}

// CheckSnapshot checks one old database the way the application will meet
// it: uploads the file at path as a store (Upload), runs opts.Migrate on
// the store's file, and has the server judge it (Check) against
// opts.Against, with the file's name as the snapshot's name. In remote mode
// Migrate runs on the store's local copy, which is checked in (CheckIn)
// before the check, and removed at the end. A store that
// passed is deleted; one that failed is kept (PATCH keep) for a look, and
// the result's StoreID says which. A Migrate that fails keeps the store
// too, and its error is returned wrapped, naming the snapshot and the
// store. A check that cannot run (an unknown build, say) deletes the store
// and returns the *Error.
func (c *Client) CheckSnapshot(ctx context.Context, path string, opts SnapshotOptions) (*CheckResult, error) {
	if opts.Migrate == nil {
		return nil, errors.New("larder: CheckSnapshot needs SnapshotOptions.Migrate, the app's own migrator")
	}
	if _, err := opts.Against.body(); err != nil {
		return nil, err
	}
	name := filepath.Base(path)
	expect := opts.Expect
	if expect == nil {
		var err error
		if expect, err = readExpect(path); err != nil {
			return nil, err
		}
	}
	label := opts.Label
	if label == "" {
		label = name
	}
	store, err := c.Upload(ctx, path, UploadOptions{Label: label})
	if err != nil {
		return nil, fmt.Errorf("larder: uploading %s: %w", name, err)
	}
	defer store.Close() // a remote store's local copy
	if err := opts.Migrate(ctx, store.Path); err != nil {
		// Kept as the migrator left it: a remote copy is checked in first.
		kept := "kept"
		if cerr := store.CheckIn(ctx); cerr != nil {
			kept = fmt.Sprintf("kept as uploaded: checking in its local copy failed: %v", cerr)
		}
		if kerr := store.Keep(ctx); kerr != nil {
			return nil, fmt.Errorf("larder: %s: the migrator failed on store %s (keeping it failed too: %v): %w", name, store.ID, kerr, err)
		}
		return nil, fmt.Errorf("larder: %s: the migrator failed on store %s (%s): %w", name, store.ID, kept, err)
	}
	if err := store.CheckIn(ctx); err != nil {
		if kerr := store.Keep(ctx); kerr != nil {
			return nil, fmt.Errorf("larder: %s: the migrated copy of store %s could not be checked in (keeping the store failed too: %v): %w", name, store.ID, kerr, err)
		}
		return nil, fmt.Errorf("larder: %s: the migrated copy of store %s could not be checked in (store kept as uploaded): %w", name, store.ID, err)
	}
	r, err := store.Check(ctx, opts.Against, CheckOptions{Snapshot: name, Expect: expect, SkipDataCheck: opts.SkipDataCheck})
	if err != nil {
		_ = store.Delete(ctx)
		return nil, fmt.Errorf("larder: checking %s: %w", name, err)
	}
	r.StoreID = store.ID
	if r.Passed {
		if err := store.Delete(ctx); err != nil && !IsNotFound(err) {
			return r, fmt.Errorf("larder: %s passed; deleting store %s: %w", name, store.ID, err)
		}
		return r, nil
	}
	if err := store.Keep(ctx); err != nil {
		return r, fmt.Errorf("larder: %s failed; keeping store %s: %w", name, store.ID, err)
	}
	r.Kept = true
	return r, nil
}

// CheckSnapshots is CheckSnapshot for every *.sqlite file of dir, one after
// another in file name order, each with its own NAME.expect.json (so
// opts.Expect and opts.Label must be empty). It stops at the first error;
// the results so far are returned with it.
func (c *Client) CheckSnapshots(ctx context.Context, dir string, opts SnapshotOptions) ([]*CheckResult, error) {
	if err := perDirectory(opts); err != nil {
		return nil, err
	}
	files, err := SnapshotFiles(dir)
	if err != nil {
		return nil, err
	}
	var results []*CheckResult
	for _, f := range files {
		r, err := c.CheckSnapshot(ctx, filepath.Join(dir, f), opts)
		if err != nil {
			return results, err
		}
		results = append(results, r)
	}
	return results, nil
}

// SnapshotFiles are the names of the *.sqlite files of dir, sorted.
func SnapshotFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("larder: snapshots: %w", err)
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".sqlite") {
			files = append(files, e.Name())
		}
	}
	sort.Strings(files)
	return files, nil
}

func perDirectory(opts SnapshotOptions) error {
	if opts.Expect != nil || opts.Label != "" {
		return errors.New("larder: Expect and Label are per snapshot (each NAME.sqlite has its own NAME.expect.json): use CheckSnapshot for one file")
	}
	return nil
}

// readExpect is NAME.expect.json beside NAME.sqlite, parsed; nil when there
// is none.
func readExpect(path string) (map[string]any, error) {
	file := strings.TrimSuffix(path, ".sqlite") + ".expect.json"
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("larder: %w", err)
	}
	var expect map[string]any
	if err := json.Unmarshal(data, &expect); err != nil {
		return nil, fmt.Errorf("larder: %s: %w", file, err)
	}
	return expect, nil
}
