package larder

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/larder-dev/larder/clients/go/internal/testenv"
)

// gallery makes a store of the gallery template with artists (4 rows) and
// artworks (12 rows), deleted when the test ends.
func gallery(t *testing.T) *Store {
	t.Helper()
	return newStore(t, StoreOptions{Template: "gallery", Fixtures: []string{"artists", "artworks"}, Label: t.Name()})
}

func newStore(t *testing.T, opts StoreOptions) *Store {
	t.Helper()
	s, err := FromEnvironment().CreateStore(testenv.Context(t), opts)
	if err != nil {
		t.Fatalf("CreateStore(%+v): %v", opts, err)
	}
	t.Cleanup(func() {
		if err := s.Delete(testenv.Context(t)); err != nil && !IsNotFound(err) {
			t.Errorf("deleting %s: %v", s.ID, err)
		}
	})
	return s
}

func wantCounts(t *testing.T, got map[string]int64, want map[string]int64) {
	t.Helper()
	for table, n := range want {
		if got[table] != n {
			t.Errorf("counts[%q] = %d, want %d (counts: %v)", table, got[table], n, got)
		}
	}
}

func TestCreateStoreWithFixtures(t *testing.T) {
	ctx := testenv.Context(t)
	s := gallery(t)
	if !strings.HasPrefix(s.ID, "st_") || s.Info.ID != s.ID {
		t.Errorf("ID = %q, Info.ID = %q", s.ID, s.Info.ID)
	}
	if st, err := os.Stat(s.Path); err != nil || st.Size() == 0 {
		t.Errorf("Path %q is not a database file on disk: %v", s.Path, err)
	}
	if s.Info.Template != "gallery" || s.Info.Version != "6" || s.Info.Label != t.Name() || s.Info.Keep {
		t.Errorf("Info = %+v", s.Info)
	}
	if s.Info.CreatedAt.IsZero() || !s.Info.ExpiresAt.After(s.Info.CreatedAt) {
		t.Errorf("created_at %v, expires_at %v", s.Info.CreatedAt, s.Info.ExpiresAt)
	}
	if s.Info.Links["artifact"] == "" || s.Info.Raw["links"] == nil {
		t.Errorf("links missing: %v", s.Info.Links)
	}
	wantCounts(t, s.Info.Counts, map[string]int64{"artists": 4, "artworks": 12, "albums": 0})

	counts, err := s.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantCounts(t, counts, map[string]int64{"artists": 4, "artworks": 12, "partners": 0, "album_artworks": 0})
	if len(counts) != 6 {
		t.Errorf("Counts() = %v, want the 6 gallery tables", counts)
	}
	some, err := s.Counts(ctx, "artists", "artworks")
	if err != nil {
		t.Fatal(err)
	}
	if len(some) != 2 || some["artists"] != 4 || some["artworks"] != 12 {
		t.Errorf("Counts(artists, artworks) = %v", some)
	}

	again, err := FromEnvironment().GetStore(ctx, s.ID)
	if err != nil || again.Path != s.Path {
		t.Fatalf("GetStore: %v, %+v", err, again)
	}
	if err := s.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = FromEnvironment().GetStore(ctx, s.ID)
	var e *Error
	if !errors.As(err, &e) || e.Status != 404 || e.Code != "store_not_found" || !IsNotFound(err) {
		t.Errorf("GetStore after Delete: %v, want 404 store_not_found", err)
	}
}

func TestQueryWritesAndReads(t *testing.T) {
	ctx := testenv.Context(t)
	s := gallery(t)
	r, err := s.Query(ctx, "INSERT INTO artworks (artist_id, title, year) VALUES (?, ?, ?)", 1, "Written from Go", 2024)
	if err != nil {
		t.Fatal(err)
	}
	if r.Changes != 1 {
		t.Errorf("Changes = %d, want 1", r.Changes)
	}
	r, err = s.Query(ctx, "SELECT id, title, year, ? AS big, 2.5 AS real, NULL AS none, ? AS blob FROM artworks WHERE title = ?",
		int64(9007199254740993), []byte{0, 1, 254, 255}, "Written from Go")
	if err != nil {
		t.Fatal(err)
	}
	wantColumns := []string{"id", "title", "year", "big", "real", "none", "blob"}
	if strings.Join(r.Columns, ",") != strings.Join(wantColumns, ",") || len(r.Rows) != 1 {
		t.Fatalf("result = %+v", r)
	}
	row := r.Rows[0]
	if id, ok := row[0].(int64); !ok || id != 13 {
		t.Errorf("id = %#v, want int64 13", row[0])
	}
	if row[1] != "Written from Go" || row[2] != int64(2024) || row[3] != int64(9007199254740993) || row[4] != 2.5 || row[5] != nil {
		t.Errorf("row = %#v", row)
	}
	if b, ok := row[6].([]byte); !ok || !bytes.Equal(b, []byte{0, 1, 254, 255}) {
		t.Errorf("blob = %#v", row[6])
	}
	counts, err := s.Counts(ctx, "artworks")
	if err != nil {
		t.Fatal(err)
	}
	wantCounts(t, counts, map[string]int64{"artworks": 13})
}

func TestWaitIsReleasedByAWrite(t *testing.T) {
	ctx := testenv.Context(t)
	s := gallery(t)
	written := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, err := s.Query(ctx, "INSERT INTO artworks (artist_id, title) VALUES (2, 'Late arrival')")
		written <- err
	}()
	start := time.Now()
	counts, err := s.Wait(ctx, "artworks>=13", 10*time.Second)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if werr := <-written; werr != nil {
		t.Fatal(werr)
	}
	wantCounts(t, counts, map[string]int64{"artworks": 13, "artists": 4})
	if elapsed < 250*time.Millisecond || elapsed > 8*time.Second {
		t.Errorf("the wait took %v; it should end soon after the write at ~300 ms", elapsed)
	}
}

func TestWaitTimesOut(t *testing.T) {
	ctx := testenv.Context(t)
	s := gallery(t)
	start := time.Now()
	counts, err := s.Wait(ctx, "artworks>=100", 300*time.Millisecond)
	if counts != nil {
		t.Errorf("counts = %v, want nil", counts)
	}
	var te *TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("Wait: %v (%T), want a *TimeoutError", err, err)
	}
	if te.Condition != "artworks>=100" || te.Timeout != 300*time.Millisecond {
		t.Errorf("TimeoutError = %+v", te)
	}
	wantCounts(t, te.Counts, map[string]int64{"artworks": 12, "artists": 4})
	if time.Since(start) < 250*time.Millisecond {
		t.Errorf("timed out after %v, before its 300 ms", time.Since(start))
	}
	var e *Error
	if !errors.As(err, &e) || e.Status != 408 || e.Code != "timeout" {
		t.Errorf("the server's error under it: %v", e)
	}
	if !strings.Contains(err.Error(), "artworks=12") {
		t.Errorf("message %q does not show the last counts", err.Error())
	}
}

func TestErrorsCarryTheirCode(t *testing.T) {
	ctx := testenv.Context(t)
	_, err := FromEnvironment().CreateStore(ctx, StoreOptions{Template: "no_such_template"})
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("CreateStore: %v (%T), want a *larder.Error", err, err)
	}
	if e.Status != 404 || e.Code != "unknown_template" || e.Message == "" || e.Details["template"] != "no_such_template" {
		t.Errorf("error = %+v", e)
	}
	var te *TimeoutError
	if errors.As(err, &te) {
		t.Errorf("an unknown template is not a TimeoutError")
	}

	s := gallery(t)
	_, err = s.Query(ctx, "SELECT * FROM no_such_table")
	if !errors.As(err, &e) || e.Status != 422 || e.Code != "sql_error" {
		t.Errorf("bad SQL: %v, want 422 sql_error", err)
	}
	_, err = s.Query(ctx, "ATTACH DATABASE '/tmp/x.sqlite' AS x")
	if !errors.As(err, &e) || e.Status != 403 || e.Code != "forbidden_sql" {
		t.Errorf("ATTACH: %v, want 403 forbidden_sql", err)
	}
	_, err = s.Load(ctx, LoadOptions{Fixtures: []string{"no_such_fixture"}})
	if !errors.As(err, &e) || e.Code != "unknown_fixture" {
		t.Errorf("unknown fixture: %v", err)
	}
}

func TestLoadAndMigrate(t *testing.T) {
	ctx := testenv.Context(t)
	s := newStore(t, StoreOptions{Template: "gallery", Version: "3"})
	if s.Info.Version != "3" {
		t.Fatalf("version = %q, want 3", s.Info.Version)
	}
	m, err := s.Migrate(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if m.From != "3" || m.To != "6" || len(m.Applied) != 3 || m.Applied[0].Version != "4" || m.Applied[0].Name == "" {
		t.Errorf("Migrate = %+v", m)
	}
	l, err := s.Load(ctx, LoadOptions{Fixtures: []string{"artists", "artworks"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Loaded) != 2 {
		t.Errorf("Loaded = %v", l.Loaded)
	}
	wantCounts(t, l.Counts, map[string]int64{"artists": 4, "artworks": 12})
	l, err = s.Load(ctx, LoadOptions{Rows: map[string][]map[string]any{
		"partners": {{"name": "Tate", "url": "https://tate.example"}, {"name": "Louvre"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	wantCounts(t, l.Counts, map[string]int64{"partners": 2})
	l, err = s.Load(ctx, LoadOptions{SQL: "INSERT INTO albums (title) VALUES ('One'); INSERT INTO albums (title) VALUES ('Two');"})
	if err != nil {
		t.Fatal(err)
	}
	wantCounts(t, l.Counts, map[string]int64{"albums": 2, "partners": 2})
	// All or nothing: the second row breaks UNIQUE(name), so neither lands.
	_, err = s.Load(ctx, LoadOptions{Rows: map[string][]map[string]any{"partners": {{"name": "New"}, {"name": "Tate"}}}})
	var e *Error
	if !errors.As(err, &e) || e.Status != 422 {
		t.Errorf("duplicate row: %v, want a 422", err)
	}
	counts, err := s.Counts(ctx, "partners")
	if err != nil {
		t.Fatal(err)
	}
	wantCounts(t, counts, map[string]int64{"partners": 2})
}

func TestSnapshotAtItsOwnVersion(t *testing.T) {
	s := newStore(t, StoreOptions{Template: "gallery", Snapshot: "v2", KeepSnapshotVersion: true})
	if s.Info.Version != "2" || s.Info.Snapshot != "v2" {
		t.Errorf("version %q snapshot %q, want 2 and v2", s.Info.Version, s.Info.Snapshot)
	}
	migrated := newStore(t, StoreOptions{Template: "gallery", Snapshot: "v2"})
	if migrated.Info.Version != "6" {
		t.Errorf("a snapshot without KeepSnapshotVersion is at %q, want 6", migrated.Info.Version)
	}
}

func TestKeepAndArtifact(t *testing.T) {
	ctx := testenv.Context(t)
	s := gallery(t)
	if _, err := s.Query(ctx, "DELETE FROM artworks WHERE id > 10"); err != nil {
		t.Fatal(err)
	}
	if err := s.Keep(ctx); err != nil {
		t.Fatal(err)
	}
	if !s.Info.Keep {
		t.Errorf("Info.Keep is false after Keep")
	}
	info, err := s.Refresh(ctx)
	if err != nil || !info.Keep {
		t.Fatalf("Refresh: %v, keep %v", err, info)
	}
	path := filepath.Join(t.TempDir(), "nested", "dir", "store.zip")
	if err := s.Artifact(ctx, path); err != nil {
		t.Fatal(err)
	}
	manifest := testenv.ReadZip(t, path)
	// Its creation state too: `larder open` shows what the test changed.
	if manifest["base"] != "base.sqlite" {
		t.Errorf("manifest base = %v, want base.sqlite", manifest["base"])
	}
	if manifest["id"] != s.ID {
		t.Errorf("manifest id = %v, want %s", manifest["id"], s.ID)
	}
	if counts, _ := manifest["counts"].(map[string]any); counts["artworks"] != 10.0 {
		t.Errorf("manifest counts = %v, want artworks 10", manifest["counts"])
	}
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*part"))
	if len(leftovers) != 0 {
		t.Errorf("partial files left: %v", leftovers)
	}
}

func TestClientFromEnvironment(t *testing.T) {
	t.Setenv("LARDER_URL", "http://example.invalid:1234/")
	t.Setenv("LARDER_TOKEN", "secret")
	c := FromEnvironment()
	if c.URL != "http://example.invalid:1234" || c.Token != "secret" {
		t.Errorf("FromEnvironment() = %+v", c)
	}
	c = New("http://127.0.0.1:9", "given")
	if c.URL != "http://127.0.0.1:9" || c.Token != "given" {
		t.Errorf("New(url, token) = %+v", c)
	}
	t.Setenv("LARDER_URL", "")
	t.Setenv("LARDER_TOKEN", "")
	if c := New("", ""); c.URL != DefaultURL || c.Token != "" {
		t.Errorf("defaults: %+v", c)
	}
}

func TestBearerToken(t *testing.T) {
	binary := os.Getenv("LARDER_BINARY")
	if binary == "" {
		t.Skip("needs LARDER_BINARY to start a server with a token")
	}
	srv, err := testenv.StartServer(binary, "--token", "s3cret-token")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	ctx := testenv.Context(t)
	_, err = New(srv.URL, "wrong").CreateStore(ctx, StoreOptions{})
	var e *Error
	if !errors.As(err, &e) || e.Status != 401 || e.Code != "unauthorized" {
		t.Errorf("wrong token: %v, want 401 unauthorized", err)
	}
	s, err := New(srv.URL, "s3cret-token").CreateStore(ctx, StoreOptions{Template: "gallery"})
	if err != nil {
		t.Fatalf("right token: %v", err)
	}
	if err := s.Delete(ctx); err != nil {
		t.Error(err)
	}
}

// wantError checks that err is a *Error with this status and code.
func wantError(t *testing.T, what string, err error, status int, code string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Status != status || e.Code != code {
		t.Errorf("%s: %v (%T), want %d %s", what, err, err, status, code)
		return nil
	}
	return e
}

// rowsByOp indexes a table's diff rows by their op, failing on a repeat.
func rowsByOp(t *testing.T, rows []DiffRow) map[string]DiffRow {
	t.Helper()
	byOp := map[string]DiffRow{}
	for _, r := range rows {
		if _, seen := byOp[r.Op]; seen {
			t.Errorf("two %q rows in %+v", r.Op, rows)
		}
		byOp[r.Op] = r
	}
	return byOp
}

func TestDiffReportsChangedRowsByKey(t *testing.T) {
	ctx := testenv.Context(t)
	s := newStore(t, StoreOptions{Template: "gallery", Fixtures: []string{"artists"}, Label: t.Name()})
	d, err := s.Diff(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Base, "gallery") || len(d.Tables) != 0 ||
		len(d.Schema.Added)+len(d.Schema.Removed)+len(d.Schema.Changed) != 0 {
		t.Errorf("Diff of an untouched store = %+v", d)
	}

	for _, w := range []struct {
		sql    string
		params []any
	}{
		{"INSERT INTO artists (id, name, born) VALUES (?, ?, ?)", []any{100, "Sonia Delaunay", 1885}},
		{"UPDATE artists SET born = ? WHERE id = ?", []any{1863, 1}},
		{"DELETE FROM artists WHERE id = ?", []any{4}},
		{"UPDATE artists SET name = ? WHERE id = ?", []any{[]byte{0, 0xff, 0x10}, 2}},
		{"INSERT INTO albums (id, title, created_at) VALUES (?, ?, ?)", []any{7, "Blue", "2024-06-01T00:00:00Z"}},
	} {
		if _, err := s.Query(ctx, w.sql, w.params...); err != nil {
			t.Fatalf("%s: %v", w.sql, err)
		}
	}

	d, err = s.Diff(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Schema.Added)+len(d.Schema.Removed)+len(d.Schema.Changed) != 0 {
		t.Errorf("schema changes %+v, want none", d.Schema)
	}
	if len(d.Tables) != 2 {
		t.Errorf("tables %v, want albums and artists only", d.Tables)
	}
	artists := d.Tables["artists"]
	if artists.Inserted != 1 || artists.Updated != 2 || artists.Deleted != 1 || artists.Truncated || len(artists.Rows) != 4 {
		t.Fatalf("artists = %+v, want 1 inserted, 2 updated, 1 deleted, 4 rows", artists)
	}
	var inserted, deleted DiffRow
	updated := map[int64]DiffRow{}
	for _, r := range artists.Rows {
		switch r.Op {
		case "insert":
			inserted = r
		case "delete":
			deleted = r
		case "update":
			id, _ := r.Key["id"].(int64)
			updated[id] = r
		default:
			t.Errorf("op %q", r.Op)
		}
	}
	if inserted.Key["id"] != int64(100) || inserted.Old != nil || inserted.New["name"] != "Sonia Delaunay" ||
		inserted.New["born"] != int64(1885) || inserted.New["country"] != "" {
		t.Errorf("insert = %+v", inserted)
	}
	if deleted.Key["id"] != int64(4) || deleted.New != nil || deleted.Old["name"] != "Agnes Martin" || deleted.Old["born"] != int64(1912) {
		t.Errorf("delete = %+v", deleted)
	}
	if u := updated[1]; u.Old["born"] != int64(1862) || u.New["born"] != int64(1863) || u.New["name"] != "Hilma af Klint" {
		t.Errorf("update of 1 = %+v", u)
	}
	if u := updated[2]; u.Old["name"] != "Katsushika Hokusai" {
		t.Errorf("update of 2 = %+v", u)
	} else if b, ok := u.New["name"].([]byte); !ok || !bytes.Equal(b, []byte{0, 0xff, 0x10}) {
		t.Errorf("a blob in a diff row is %#v, want []byte{0, 0xff, 0x10}", u.New["name"])
	}
	albums := d.Tables["albums"]
	if len(albums.Rows) != 1 || albums.Inserted != 1 || albums.Rows[0].Key["id"] != int64(7) || albums.Rows[0].New["title"] != "Blue" {
		t.Errorf("albums = %+v", albums)
	}

	// Limit cuts the rows listed, not the counts.
	d, err = s.Diff(ctx, DiffOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if a := d.Tables["artists"]; len(a.Rows) != 1 || !a.Truncated || a.Inserted != 1 || a.Updated != 2 || a.Deleted != 1 {
		t.Errorf("Limit 1: artists = %+v", a)
	}
	if a := d.Tables["albums"]; len(a.Rows) != 1 || a.Truncated {
		t.Errorf("Limit 1: albums = %+v", a)
	}
	d, err = s.Diff(ctx, DiffOptions{CountsOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if a := d.Tables["artists"]; len(a.Rows) != 0 || !a.Truncated || a.Updated != 2 {
		t.Errorf("CountsOnly: artists = %+v", a)
	}

	// Tables narrows.
	d, err = s.Diff(ctx, DiffOptions{Tables: []string{"albums"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Tables["albums"]; !ok || len(d.Tables) != 1 {
		t.Errorf("Tables albums: %v", d.Tables)
	}
	d, err = s.Diff(ctx, DiffOptions{Tables: []string{"artists", "partners"}, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := d.Tables["artists"]; !ok || len(d.Tables) != 1 || len(a.Rows) != 3 || !a.Truncated {
		t.Errorf("Tables artists, partners, Limit 3: %v", d.Tables)
	}
}

func TestDiffOfSchemaChanges(t *testing.T) {
	ctx := testenv.Context(t)
	s := newStore(t, StoreOptions{Template: "gallery", Fixtures: []string{"artists"}, Label: t.Name()})
	for _, sql := range []string{
		"ALTER TABLE artists ADD COLUMN photo BLOB",
		"CREATE TABLE notes (body TEXT)",
		"DROP TABLE artwork_partners",
	} {
		if _, err := s.Query(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	d, err := s.Diff(ctx)
	if err != nil {
		t.Fatal(err)
	}
	added := map[string]SchemaChange{}
	for _, c := range d.Schema.Added {
		added[c.Type+" "+c.Name] = c
	}
	if c := added["column photo"]; len(added) != 2 || c.Table != "artists" || c.Old != nil {
		t.Errorf("added = %+v", d.Schema.Added)
	} else if col, _ := c.New.(map[string]any); col["type"] != "BLOB" || col["pk"] != int64(0) {
		t.Errorf("the added column is described as %#v", c.New)
	}
	if _, ok := added["table notes"]; !ok {
		t.Errorf("added = %+v, want table notes", d.Schema.Added)
	}
	if len(d.Schema.Removed) != 1 || d.Schema.Removed[0].Type != "table" || d.Schema.Removed[0].Name != "artwork_partners" ||
		d.Schema.Removed[0].Old == nil || d.Schema.Removed[0].New != nil {
		t.Errorf("removed = %+v", d.Schema.Removed)
	}
	if len(d.Schema.Changed) != 0 {
		t.Errorf("changed = %+v", d.Schema.Changed)
	}
}

func TestDiffErrors(t *testing.T) {
	ctx := testenv.Context(t)
	s := newStore(t, StoreOptions{Template: "gallery", Fixtures: []string{"artists"}, Label: t.Name()})
	_, err := s.Diff(ctx, DiffOptions{Tables: []string{"artists", "no_such_table"}})
	if e := wantError(t, "Diff of an unknown table", err, 400, "bad_request"); e != nil && !strings.Contains(e.Message, "no_such_table") {
		t.Errorf("message %q does not name the table", e.Message)
	}
	for _, limit := range []int{-1, 10001} {
		_, err = s.Diff(ctx, DiffOptions{Limit: limit})
		wantError(t, "Diff with Limit "+strconv.Itoa(limit), err, 400, "bad_request")
	}
	if err := s.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = s.Diff(ctx)
	wantError(t, "Diff of a deleted store", err, 404, "store_not_found")
}

func TestResetInPlace(t *testing.T) {
	ctx := testenv.Context(t)
	s := gallery(t)
	path := s.Path
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		"DELETE FROM artworks",
		"INSERT INTO artists (id, name) VALUES (100, 'Sonia Delaunay')",
		"INSERT INTO albums (title) VALUES ('Blue')",
	} {
		if _, err := s.Query(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if err := s.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Path != path || s.Info.Path != path || s.Info.ID != s.ID {
		t.Errorf("after Reset: Path %q, Info %+v; want the same path %q", s.Path, s.Info, path)
	}
	if after, err := os.Stat(path); err != nil || !os.SameFile(before, after) {
		t.Errorf("after Reset %s is not the same file: %v", path, err)
	}
	if strings.Join(s.Info.Fixtures, ",") != "artists,artworks" {
		t.Errorf("Info.Fixtures = %v", s.Info.Fixtures)
	}
	wantCounts(t, s.Info.Counts, map[string]int64{"artists": 4, "artworks": 12, "albums": 0})
	counts, err := s.Counts(ctx, "artists", "artworks", "albums")
	if err != nil {
		t.Fatal(err)
	}
	wantCounts(t, counts, map[string]int64{"artists": 4, "artworks": 12, "albums": 0})
	r, err := s.Query(ctx, "SELECT count(*) FROM artists WHERE id = 100")
	if err != nil || r.Rows[0][0] != int64(0) {
		t.Errorf("the inserted artist after Reset: %v %v", r, err)
	}
	d, err := s.Diff(ctx)
	if err != nil || len(d.Tables) != 0 {
		t.Errorf("Diff after Reset = %+v, %v; want no changes", d, err)
	}
	// The store goes on after a reset.
	if _, err := s.Query(ctx, "INSERT INTO albums (title) VALUES ('After')"); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Diff(ctx); err != nil || d.Tables["albums"].Inserted != 1 {
		t.Errorf("Diff after a write after Reset = %+v, %v", d, err)
	}

	if err := s.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	wantError(t, "Reset of a deleted store", s.Reset(ctx), 404, "store_not_found")
}

func TestForkCopiesALiveStore(t *testing.T) {
	ctx := testenv.Context(t)
	source := newStore(t, StoreOptions{Template: "gallery", Fixtures: []string{"artists"}, Label: t.Name() + " source"})
	if _, err := source.Query(ctx, "INSERT INTO artists (id, name, born) VALUES (?, ?, ?)", 100, "Sonia Delaunay", 1885); err != nil {
		t.Fatal(err)
	}
	fork := newStore(t, StoreOptions{From: source.ID, Fixtures: []string{"artworks"}, Label: t.Name() + " fork"})
	if fork.ID == source.ID || fork.Path == source.Path {
		t.Fatalf("fork %s at %s is the source %s at %s", fork.ID, fork.Path, source.ID, source.Path)
	}
	if fork.Info.Template != "gallery" || fork.Info.Version != "6" || fork.Info.Label != t.Name()+" fork" {
		t.Errorf("fork Info = %+v", fork.Info)
	}
	if strings.Join(fork.Info.Fixtures, ",") != "artists,artworks" {
		t.Errorf("fork Info.Fixtures = %v, want the source's then its own", fork.Info.Fixtures)
	}
	wantCounts(t, fork.Info.Counts, map[string]int64{"artists": 5, "artworks": 12})
	r, err := fork.Query(ctx, "SELECT name, born FROM artists WHERE id = 100")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 1 || r.Rows[0][0] != "Sonia Delaunay" || r.Rows[0][1] != int64(1885) {
		t.Errorf("the source's row in the fork: %v", r.Rows)
	}
	// The fork's base is the fork as made: no changes yet.
	if d, err := fork.Diff(ctx); err != nil || len(d.Tables) != 0 {
		t.Errorf("Diff of a new fork = %+v, %v", d, err)
	}
	// Fork and source are separate stores from now on.
	if _, err := fork.Query(ctx, "DELETE FROM artists WHERE id = 100"); err != nil {
		t.Fatal(err)
	}
	if counts, err := source.Counts(ctx, "artists"); err != nil || counts["artists"] != 5 {
		t.Errorf("source counts after a write to the fork: %v, %v", counts, err)
	}
	if err := fork.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, fork.Info.Counts, map[string]int64{"artists": 5, "artworks": 12})

	c := FromEnvironment()
	_, err = c.CreateStore(ctx, StoreOptions{From: source.ID, Template: "gallery"})
	wantError(t, "From with Template", err, 400, "bad_request")
	_, err = c.CreateStore(ctx, StoreOptions{From: source.ID, Version: "3"})
	wantError(t, "From with Version", err, 400, "bad_request")
	_, err = c.CreateStore(ctx, StoreOptions{From: "st_nothere"})
	wantError(t, "From an unknown store", err, 404, "store_not_found")
}
