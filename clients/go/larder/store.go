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
	"time"

	"github.com/larder-dev/larder/clients/go/internal/hook"
)

// StoreInfo is a store as the server describes it (POST /stores,
// GET /stores/{id}). Raw holds the whole answer, fields this type does not
// name included.
type StoreInfo struct {
	ID        string            `json:"id"`
	Path      string            `json:"path"`
	Template  string            `json:"template"`
	Version   string            `json:"version"`
	Snapshot  string            `json:"snapshot"`
	Fixtures  []string          `json:"fixtures"`
	Build     string            `json:"build"` // the key of the app-built template it copies
	Label     string            `json:"label"`
	Counts    map[string]int64  `json:"counts"`
	CreatedAt time.Time         `json:"created_at"`
	ExpiresAt time.Time         `json:"expires_at"`
	Keep      bool              `json:"keep"`
	SizeBytes int64             `json:"size_bytes"`
	Links     map[string]string `json:"links"`
	Raw       map[string]any    `json:"-"`
}

// UnmarshalJSON fills the named fields and Raw.
func (i *StoreInfo) UnmarshalJSON(data []byte) error {
	type plain StoreInfo // without this method, so no recursion
	var p plain
	if err := unmarshalWithRaw(data, &p, &p.Raw); err != nil {
		return err
	}
	*i = StoreInfo(p) // all or nothing: a failed decode leaves i as it was
	return nil
}

// unmarshalWithRaw decodes the JSON object data into fields (a pointer to
// an info struct's method-less twin) and, whole, into raw.
func unmarshalWithRaw(data []byte, fields any, raw *map[string]any) error {
	if err := json.Unmarshal(data, fields); err != nil {
		return err
	}
	return json.Unmarshal(data, raw)
}

// Store is one store of the server. ID and Path do not change; Info is the
// server's description as of the last call that answered it (CreateStore,
// Refresh, Keep, Reset, CheckIn). The methods may be called from several
// goroutines, except that those updating Info must not race with readers of
// Info.
//
// In remote mode (Remote true; see Client.ResolveMode) Path is a local copy
// of the server's store, the test's working copy, and Info.Path the server's
// file, which the test cannot open. CheckIn hands the copy back. The calls
// that change the store on the server keep the copy the working copy: Load,
// Migrate and Query first check the copy in when its files changed since
// it was last checked out or in (their size or modification time, the
// -wal's included), and Load, Migrate, Reset and a Query that changed rows
// then download the store over the copy. The calls that read the server's
// store (Counts, Wait, Diff, Artifact, Check, a read-only Query, a fork
// with StoreOptions.From) see what was last checked in, not the copy's
// later writes: call CheckIn first. Close your own connections to Path
// before CheckIn and before a call that downloads over it. Delete and
// Close remove the copy's folder.
type Store struct {
	ID   string    // URL-safe id, e.g. "st_5ca1ab1e..."
	Path string    // the live SQLite file, for a driver on the same machine; in remote mode the local copy
	Info StoreInfo // the server's description of the store (its Path is the server's file)

	client *Client
	remote *localCopy // the local copy, in remote mode
	// settle, when set (lardertest, through internal/hook), is waited for
	// before every request about the store: its label set in the background.
	settle func()
}

func (c *Client) newStore(info StoreInfo) *Store {
	return &Store{ID: info.ID, Path: info.Path, Info: info, client: c}
}

// Client returns the client the store belongs to.
func (s *Store) Client() *Client { return s.client }

func (s *Store) path(sub string) string {
	if s.settle != nil {
		s.settle()
	}
	return "/stores/" + url.PathEscape(s.ID) + sub
}

func init() {
	hook.Settle = func(store any, wait func()) { store.(*Store).settle = wait }
	hook.Patch = func(ctx context.Context, store any, body map[string]any) error {
		s := store.(*Store)
		var info StoreInfo
		if err := s.client.call(ctx, http.MethodPatch, "/stores/"+url.PathEscape(s.ID), nil, body, &info); err != nil {
			return err
		}
		s.setInfo(info)
		return nil
	}
	hook.StoreBody = func(opts any) map[string]any { return opts.(StoreOptions).body() }
	hook.AnswerError = func(status int, raw []byte) error {
		return answerError(status, strconv.Itoa(status)+" "+http.StatusText(status), raw)
	}
	hook.NewStore = func(client any, answer []byte) (any, error) {
		var info StoreInfo
		if err := json.Unmarshal(answer, &info); err != nil {
			return nil, err
		}
		return client.(*Client).newStore(info), nil
	}
}

func (s *Store) setInfo(info StoreInfo) {
	s.Info = info
	if info.Path != "" && s.remote == nil {
		s.Path = info.Path
	}
}

// Refresh reads the store again (GET /stores/{id}) and updates Info.
func (s *Store) Refresh(ctx context.Context) (*StoreInfo, error) {
	var info StoreInfo
	if err := s.client.call(ctx, http.MethodGet, s.path(""), nil, nil, &info); err != nil {
		return nil, err
	}
	s.setInfo(info)
	return &s.Info, nil
}

type countsAnswer struct {
	Counts map[string]int64 `json:"counts"`
}

// Counts returns the row count of every user table, or of the tables named
// (GET /stores/{id}/counts).
func (s *Store) Counts(ctx context.Context, tables ...string) (map[string]int64, error) {
	var q url.Values
	if len(tables) > 0 {
		q = url.Values{"tables": {strings.Join(tables, ",")}}
	}
	var a countsAnswer
	if err := s.client.call(ctx, http.MethodGet, s.path("/counts"), q, nil, &a); err != nil {
		return nil, err
	}
	return a.Counts, nil
}

// TimeoutError is what Wait returns when its condition did not hold within
// the timeout (the server's 408 "timeout" to a wait), and what Client.Build
// returns when another caller's build was not ready in time (Condition
// "build KEY ready", no Counts). Counts are the last counts the server saw.
// Detect it with errors.As; it unwraps to the server's *Error.
type TimeoutError struct {
	Condition string
	Timeout   time.Duration
	Counts    map[string]int64
	Err       *Error
}

func (e *TimeoutError) Error() string {
	if len(e.Counts) == 0 {
		return fmt.Sprintf("larder: %q did not hold within %v", e.Condition, e.Timeout)
	}
	keys := make([]string, 0, len(e.Counts))
	for k := range e.Counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, e.Counts[k])
	}
	return fmt.Sprintf("larder: %q did not hold within %v (counts: %s)", e.Condition, e.Timeout, strings.Join(parts, ", "))
}

func (e *TimeoutError) Unwrap() error { return e.Err }

// Wait waits until condition holds, e.g. "artworks>=13" (operators
// >= > = <= <), and returns the counts that satisfied it (a long poll:
// GET /stores/{id}/counts?wait=...). When it does not hold within timeout the
// error is a *TimeoutError with the last counts. A timeout of zero or less
// leaves the limit to the server's default.
func (s *Store) Wait(ctx context.Context, condition string, timeout time.Duration) (map[string]int64, error) {
	q := url.Values{"wait": {condition}}
	wait := serverWaitDefault
	if timeout > 0 {
		q.Set("timeout_ms", strconv.FormatInt(milliseconds(timeout), 10))
		wait = timeout
	}
	var a countsAnswer
	err := s.client.callWaiting(ctx, http.MethodGet, s.path("/counts"), q, nil, &a, wait)
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusRequestTimeout && e.Code == "timeout" {
		t := &TimeoutError{Condition: condition, Timeout: timeout, Counts: map[string]int64{}, Err: e}
		if counts, ok := e.Details["counts"].(map[string]any); ok {
			for k, v := range counts {
				if n, ok := v.(float64); ok {
					t.Counts[k] = int64(n)
				}
			}
		}
		if ms, ok := e.Details["timeout_ms"].(float64); ok && timeout <= 0 {
			t.Timeout = time.Duration(ms) * time.Millisecond
		}
		return nil, t
	}
	if err != nil {
		return nil, err
	}
	return a.Counts, nil
}

// QueryResult is the answer of Query. Values in Rows are nil, int64,
// float64, string or []byte (a blob).
type QueryResult struct {
	Columns   []string
	Rows      [][]any
	Changes   int64
	Truncated bool
}

// Query runs one SQL statement in the store (POST /stores/{id}/query), with
// params bound to its ? placeholders. []byte params are sent as blobs.
//
// In remote mode a copy that changed is checked in first, and a statement
// that changed rows (Changes > 0) has the store downloaded over the copy
// after; a schema change alone (Changes 0) does not.
func (s *Store) Query(ctx context.Context, sql string, params ...any) (result *QueryResult, err error) {
	err = s.serverChange(ctx, "the query", true, func() (bool, error) {
		result, err = s.query(ctx, sql, params)
		return err == nil && result.Changes > 0, err
	})
	return result, err
}

func (s *Store) query(ctx context.Context, sql string, params []any) (*QueryResult, error) {
	body := map[string]any{"sql": sql}
	if len(params) > 0 {
		body["params"] = encodeValue(params)
	}
	resp, err := s.client.send(ctx, http.MethodPost, s.path("/query"), nil, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var a struct {
		Columns   []string `json:"columns"`
		Rows      [][]any  `json:"rows"`
		Changes   int64    `json:"changes"`
		Truncated bool     `json:"truncated"`
	}
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("larder: query: decoding the answer: %w", err)
	}
	r := &QueryResult{Columns: a.Columns, Rows: make([][]any, len(a.Rows)), Changes: a.Changes, Truncated: a.Truncated}
	for i, row := range a.Rows {
		r.Rows[i] = decodeValue(row).([]any)
	}
	return r, nil
}

// LoadOptions say what Load puts into the store: named fixtures of the
// store's template, rows by table, or SQL. Give one of them.
type LoadOptions struct {
	Fixtures []string
	Rows     map[string][]map[string]any
	SQL      string
}

// LoadResult is the answer of Load.
type LoadResult struct {
	Loaded []string         `json:"loaded"`
	Counts map[string]int64 `json:"counts"`
}

// Load loads data into the store, all or nothing (POST /stores/{id}/fixtures).
// []byte values in Rows are sent as blobs. In remote mode a copy that
// changed is checked in first, and the store downloaded over the copy after.
func (s *Store) Load(ctx context.Context, opts LoadOptions) (*LoadResult, error) {
	body := map[string]any{}
	if opts.Fixtures != nil {
		body["fixtures"] = opts.Fixtures
	}
	if opts.Rows != nil {
		rows := make(map[string]any, len(opts.Rows))
		for table, rs := range opts.Rows {
			list := make([]any, len(rs))
			for i, r := range rs {
				list[i] = encodeValue(r)
			}
			rows[table] = list
		}
		body["rows"] = rows
	}
	if opts.SQL != "" {
		body["sql"] = opts.SQL
	}
	var r LoadResult
	err := s.serverChange(ctx, "loading", true, func() (bool, error) {
		return true, s.client.call(ctx, http.MethodPost, s.path("/fixtures"), nil, body, &r)
	})
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// AppliedMigration is one migration that Migrate ran.
type AppliedMigration struct {
	Version string  `json:"version"`
	Name    string  `json:"name"`
	MS      float64 `json:"ms"`
}

// MigrateResult is the answer of Migrate.
type MigrateResult struct {
	From    string             `json:"from"`
	To      string             `json:"to"`
	Applied []AppliedMigration `json:"applied"`
}

// Migrate migrates the store to version to; "" means "latest"
// (POST /stores/{id}/migrate). In remote mode a copy that changed is
// checked in first, and the store downloaded over the copy after when a
// migration ran.
func (s *Store) Migrate(ctx context.Context, to string) (*MigrateResult, error) {
	if to == "" {
		to = "latest"
	}
	var r MigrateResult
	err := s.serverChange(ctx, "migrating", true, func() (bool, error) {
		err := s.client.call(ctx, http.MethodPost, s.path("/migrate"), nil, map[string]any{"to": to}, &r)
		return err == nil && len(r.Applied) > 0, err
	})
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// Reset puts the store's contents back to what they were when it was
// created, in place (same Path), and updates Info (POST /stores/{id}/reset).
// In remote mode the store is then downloaded over the local copy, whose
// changes are dropped (never checked in).
func (s *Store) Reset(ctx context.Context) error {
	return s.serverChange(ctx, "the reset", false, func() (bool, error) {
		var info StoreInfo
		if err := s.client.call(ctx, http.MethodPost, s.path("/reset"), nil, map[string]any{}, &info); err != nil {
			return false, err
		}
		s.setInfo(info)
		return true, nil
	})
}

// Diff is what changed in a store since it was created
// (GET /stores/{id}/diff).
type Diff struct {
	// Base says in words what the store was made from, e.g. "template
	// gallery at version 6 with fixtures artists".
	Base   string     `json:"base"`
	Schema DiffSchema `json:"schema"`
	// Tables are the tables with changed rows; the others are left out.
	Tables map[string]TableDiff `json:"tables"`
}

// DiffSchema lists the schema objects added, removed and changed.
type DiffSchema struct {
	Added   []SchemaChange `json:"added"`
	Removed []SchemaChange `json:"removed"`
	Changed []SchemaChange `json:"changed"`
}

// SchemaChange is one schema object added, removed or changed. Type is
// "table", "column", "index", "foreign_keys", "view" or "trigger"; Table is
// the table of a column or an index. Old and New describe the object before
// and after (nil when it was added or removed) as the server does: maps and
// slices, with numbers as int64 or float64.
type SchemaChange struct {
	Type  string `json:"type"`
	Name  string `json:"name"`
	Table string `json:"table"`
	Old   any    `json:"old"`
	New   any    `json:"new"`
}

// TableDiff is what changed in one table. The counts are always whole;
// Rows lists at most DiffOptions.Limit of the changed rows, and Truncated
// says that it lists fewer than changed.
type TableDiff struct {
	Inserted  int64     `json:"inserted"`
	Updated   int64     `json:"updated"`
	Deleted   int64     `json:"deleted"`
	Truncated bool      `json:"truncated"`
	Rows      []DiffRow `json:"rows"`
}

// DiffRow is one changed row: Op is "insert", "update" or "delete"; Key is
// its key (declared primary key, else rowid); Old is nil for an insert and
// New nil for a delete. Values are nil, int64, float64, string or []byte
// (a blob), as in a QueryResult.
type DiffRow struct {
	Op  string         `json:"op"`
	Key map[string]any `json:"key"`
	Old map[string]any `json:"old"`
	New map[string]any `json:"new"`
}

// DiffOptions narrow Diff: at most Limit rows listed per table (0..10000;
// zero leaves it to the server's default, 100), only Tables. CountsOnly
// sends limit=0: the counts without any rows; not with Limit.
type DiffOptions struct {
	Limit      int
	Tables     []string
	CountsOnly bool
}

// Diff returns what changed since the store was created
// (GET /stores/{id}/diff). At most one DiffOptions may be given. An unknown
// table or a Limit out of range is a *Error with status 400.
func (s *Store) Diff(ctx context.Context, opts ...DiffOptions) (*Diff, error) {
	q := url.Values{}
	for _, o := range opts {
		if o.Limit != 0 {
			q.Set("limit", strconv.Itoa(o.Limit))
		} else if o.CountsOnly {
			q.Set("limit", "0")
		}
		if len(o.Tables) > 0 {
			q.Set("tables", strings.Join(o.Tables, ","))
		}
	}
	resp, err := s.client.send(ctx, http.MethodGet, s.path("/diff"), q, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var d Diff
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("larder: diff: decoding the answer: %w", err)
	}
	for _, list := range [][]SchemaChange{d.Schema.Added, d.Schema.Removed, d.Schema.Changed} {
		for i := range list {
			list[i].Old = decodeValue(list[i].Old)
			list[i].New = decodeValue(list[i].New)
		}
	}
	for _, t := range d.Tables {
		for _, row := range t.Rows {
			for _, values := range []map[string]any{row.Key, row.Old, row.New} {
				for column, v := range values {
					values[column] = decodeValue(v)
				}
			}
		}
	}
	return &d, nil
}

// Artifact saves the store's artifact, a zip of store.sqlite and
// manifest.json (GET /stores/{id}/artifact), to the file path, creating its
// directory. In remote mode it holds the store as last checked in. The zip is streamed to a temporary file beside path and renamed
// into place once complete, so path never holds half a zip.
func (s *Store) Artifact(ctx context.Context, path string) (err error) {
	// With the store's creation state (base.sqlite): `larder open` shows what the test changed.
	resp, err := s.client.download(ctx, s.path("/artifact?base=true"))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("larder: artifact: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.part")
	if err != nil {
		return fmt.Errorf("larder: artifact: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = io.Copy(f, resp.Body); err != nil {
		return fmt.Errorf("larder: artifact: downloading: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("larder: artifact: %w", err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("larder: artifact: %w", err)
	}
	return nil
}

// Keep marks the store to outlive its time to live until deleted
// (PATCH /stores/{id} {"keep": true}) and updates Info.
func (s *Store) Keep(ctx context.Context) error {
	var info StoreInfo
	if err := s.client.call(ctx, http.MethodPatch, s.path(""), nil, map[string]any{"keep": true}, &info); err != nil {
		return err
	}
	s.setInfo(info)
	return nil
}

// Delete closes the store and removes its files (DELETE /stores/{id}); in
// remote mode the local copy's folder too (as Close), whatever the server
// answered, with no check-in.
func (s *Store) Delete(ctx context.Context) error {
	err := s.client.call(ctx, http.MethodDelete, s.path(""), nil, nil, nil)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return err
}
