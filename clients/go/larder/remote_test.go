package larder

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/larder-dev/larder/clients/go/internal/testenv"
)

// Remote mode (issue 47) against a hidden server (testenv.HiddenServer):
// this process cannot open any of its stores' files, as for a server on
// another machine, so every test here proves that the client works on its
// own local copy. The sqlite3 shell plays the test's (or the app's) SQLite.

// requests records the requests a client sends, as "METHOD last-path-element
// [content type]" (e.g. "PUT database application/zip"), and sends them.
type requests struct {
	mu   sync.Mutex
	list []string
}

func (r *requests) RoundTrip(req *http.Request) (*http.Response, error) {
	entry := req.Method + " " + filepath.Base(req.URL.Path)
	if ct := req.Header.Get("Content-Type"); req.Method == http.MethodPut || ct == "application/vnd.sqlite3" || ct == "application/zip" {
		entry += " " + ct
	}
	r.mu.Lock()
	r.list = append(r.list, entry)
	r.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

// take answers the requests recorded since the last take.
func (r *requests) take() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	list := strings.Join(r.list, "; ")
	r.list = nil
	return list
}

// remoteClient is a client of the hidden server in remote mode (whose URL is
// on the loopback address, so the mode is set), recording its requests.
func remoteClient(t *testing.T) (*Client, *requests) {
	t.Helper()
	server := testenv.HiddenServer(t)
	rec := &requests{}
	c := New(server.URL, "")
	c.Mode = ModeRemote
	c.HTTPClient = &http.Client{Transport: rec, Timeout: 2 * time.Minute}
	return c, rec
}

// remoteStore makes a store on c, checks that it is a local copy in a
// private folder of its own while the server's file is out of reach, and
// deletes it when the test ends.
func remoteStore(t *testing.T, c *Client, opts StoreOptions) *Store {
	t.Helper()
	s, err := c.CreateStore(testenv.Context(t), opts)
	if err != nil {
		t.Fatalf("CreateStore(%+v): %v", opts, err)
	}
	t.Cleanup(func() {
		if err := s.Delete(testenv.Context(t)); err != nil && !IsNotFound(err) {
			t.Errorf("deleting %s: %v", s.ID, err)
		}
	})
	wantLocalCopy(t, s)
	return s
}

// wantLocalCopy checks that s is remote: Path a local file
// larder-remote-XXXX/store.sqlite in a folder only its user may enter,
// Info.Path the server's file, which this process cannot see.
func wantLocalCopy(t *testing.T, s *Store) {
	t.Helper()
	if !s.Remote() {
		t.Fatalf("store %s is not remote", s.ID)
	}
	dir := filepath.Dir(s.Path)
	if filepath.Base(s.Path) != "store.sqlite" || !strings.HasPrefix(filepath.Base(dir), "larder-remote-") {
		t.Errorf("Path %q, want larder-remote-XXXX/store.sqlite", s.Path)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("the copy's folder %s: %v, %v; want mode 0700", dir, st, err)
	}
	if st, err := os.Stat(s.Path); err != nil || st.Size() == 0 {
		t.Errorf("the local copy %s: %v", s.Path, err)
	}
	if s.Info.Path == "" || s.Info.Path == s.Path {
		t.Errorf("Info.Path %q, want the server's file", s.Info.Path)
	}
	if _, err := os.Stat(s.Info.Path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the server's file %s: %v; the hidden server's files must be out of reach", s.Info.Path, err)
	}
}

// sqlite runs sql on the file at path with the sqlite3 shell.
func sqlite(t *testing.T, path, sql string) string {
	t.Helper()
	out, err := testenv.RunSQL(testenv.Context(t), testenv.SQLite3(t), path, sql)
	if err != nil {
		t.Fatalf("sqlite3 %s: %v", path, err)
	}
	return out
}

// wantCalls checks the requests recorded since the last take.
func wantCalls(t *testing.T, rec *requests, what, want string) {
	t.Helper()
	if got := rec.take(); got != want {
		t.Errorf("%s sent %q, want %q", what, got, want)
	}
}

func TestRemoteStoreIsALocalCopyCheckedIn(t *testing.T) {
	ctx := testenv.Context(t)
	c, rec := remoteClient(t)
	s := remoteStore(t, c, StoreOptions{Template: "gallery", Fixtures: []string{"artists", "artworks"}, Label: t.Name()})
	wantCalls(t, rec, "CreateStore", "POST stores; GET database")
	if got := sqlite(t, s.Path, "SELECT count(*) FROM artists;"); got != "4" {
		t.Errorf("the local copy has %s artists, want 4", got)
	}

	sqlite(t, s.Path, "INSERT INTO artists (name) VALUES ('Written here'); UPDATE artworks SET year = 1901 WHERE id = 1;")
	// The server's store is what was last checked in.
	counts, err := s.Counts(ctx, "artists")
	if err != nil || counts["artists"] != 4 {
		t.Errorf("counts before the check-in: %v, %v; want the server's 4 artists", counts, err)
	}
	rec.take()
	if err := s.CheckIn(ctx); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, rec, "CheckIn", "PUT database application/vnd.sqlite3")
	if s.Info.Counts["artists"] != 5 || !strings.HasPrefix(s.Path, os.TempDir()) {
		t.Errorf("after CheckIn: Info.Counts %v, Path %q", s.Info.Counts, s.Path)
	}
	wantCounts(t, mustCounts(t, s), map[string]int64{"artists": 5, "artworks": 12})
	d, err := s.Diff(ctx)
	if err != nil {
		t.Fatal(err)
	}
	artists, artworks := d.Tables["artists"], d.Tables["artworks"]
	if artists.Inserted != 1 || len(artists.Rows) != 1 || artists.Rows[0].New["name"] != "Written here" {
		t.Errorf("diff of artists: %+v, want the row written in the copy", artists)
	}
	if artworks.Updated != 1 || artworks.Inserted != 0 || artworks.Deleted != 0 {
		t.Errorf("diff of artworks: %+v, want one update", artworks)
	}
	if !strings.Contains(d.Base, "gallery") {
		t.Errorf("diff base %q: the check-in must keep the creation state", d.Base)
	}

	// A write right after the check-in that keeps the file's size (within
	// the file system's timestamp granularity) still counts as a change.
	data, err := os.ReadFile(s.Path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte("Written here"))
	if i < 0 {
		t.Fatal("the copy does not hold the row written")
	}
	copy(data[i:], "Written HERE")
	if err := os.WriteFile(s.Path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	rec.take()
	if r, err := s.Query(ctx, "SELECT count(*) FROM artists WHERE name = 'Written HERE'"); err != nil || r.Rows[0][0] != int64(1) {
		t.Errorf("the server after a same-size write and a query: %+v, %v; want the write checked in first", r, err)
	}
	wantCalls(t, rec, "a Query after a local write", "PUT database application/vnd.sqlite3; POST query")

	// Close removes the copy, not the store; Delete sends no check-in.
	dir := filepath.Dir(s.Path)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Close, %s: %v, want it gone", dir, err)
	}
	if err := s.CheckIn(ctx); err == nil || !strings.Contains(err.Error(), "removed") {
		t.Errorf("CheckIn after Close: %v, want an error", err)
	}
	if _, err := s.Query(ctx, "INSERT INTO artists (name) VALUES ('on the server')"); err != nil {
		t.Errorf("Query after Close: %v", err)
	}
	rec.take()
	if err := s.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, rec, "Delete", "DELETE "+s.ID)

	// Delete of a store whose copy is still there removes the folder too.
	other := remoteStore(t, c, StoreOptions{Template: "gallery"})
	rec.take()
	if err := other.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, rec, "Delete", "DELETE "+other.ID)
	if _, err := os.Stat(filepath.Dir(other.Path)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Delete, the copy's folder: %v, want it gone", err)
	}

	// Local mode: CheckIn and Close do nothing.
	local := gallery(t)
	if local.Remote() || local.Path != local.Info.Path || local.CheckIn(ctx) != nil || local.Close() != nil {
		t.Errorf("a local store: Remote %v, Path %q, Info.Path %q", local.Remote(), local.Path, local.Info.Path)
	}
	if _, err := os.Stat(local.Path); err != nil {
		t.Errorf("Close removed a local store's file: %v", err)
	}
}

func mustCounts(t *testing.T, s *Store) map[string]int64 {
	t.Helper()
	counts, err := s.Counts(testenv.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	return counts
}

// A copy whose last writes are still in its -wal (the sqlite3 shell keeps
// it on close with no_ckpt_on_close) is checked in as a zip of both.
func TestRemoteCheckInSendsTheWAL(t *testing.T) {
	ctx := testenv.Context(t)
	c, rec := remoteClient(t)
	s := remoteStore(t, c, StoreOptions{Template: "gallery", Fixtures: []string{"artists"}})
	sqlite(t, s.Path, ".dbconfig no_ckpt_on_close on\nPRAGMA journal_mode=WAL;\nINSERT INTO artists (name) VALUES ('In the WAL'); INSERT INTO artists (name) VALUES ('Last write');")
	if st, err := os.Stat(s.Path + "-wal"); err != nil || st.Size() == 0 {
		t.Fatalf("the copy's -wal: %v, %v; want the writes left in it", st, err)
	}
	// The database file alone lacks them.
	alone := filepath.Join(t.TempDir(), "alone.sqlite")
	data, err := os.ReadFile(s.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := sqlite(t, alone, "SELECT count(*) FROM artists;"); got != "4" {
		t.Fatalf("the database file alone has %s artists; want 4 (the writes in the -wal only)", got)
	}
	rec.take()
	if err := s.CheckIn(ctx); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, rec, "CheckIn", "PUT database application/zip")
	wantCounts(t, mustCounts(t, s), map[string]int64{"artists": 6})
	r, err := s.Query(ctx, "SELECT name FROM artists ORDER BY id DESC LIMIT 1")
	if err != nil || len(r.Rows) != 1 || r.Rows[0][0] != "Last write" {
		t.Errorf("the server's last artist: %+v, %v; want the last write", r, err)
	}
	// The copy still reads as it did (the zip was made beside it, and removed).
	if got := sqlite(t, s.Path, "SELECT count(*) FROM artists;"); got != "6" {
		t.Errorf("the copy has %s artists after the check-in, want 6", got)
	}
	entries, _ := os.ReadDir(filepath.Dir(s.Path))
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "store.sqlite") {
			t.Errorf("the copy's folder holds %s", e.Name())
		}
	}
}

// Load, Migrate, Query and Reset change the store on the server: a copy
// that changed is checked in first, and the store comes back over the copy.
func TestRemoteServerSideChangesRefreshTheCopy(t *testing.T) {
	ctx := testenv.Context(t)
	c, rec := remoteClient(t)
	s := remoteStore(t, c, StoreOptions{Template: "gallery", Version: "5", Fixtures: []string{"artists"}})
	count := func() string { return sqlite(t, s.Path, "SELECT count(*) FROM artists;") }
	rec.take()

	sqlite(t, s.Path, "INSERT INTO artists (name) VALUES ('Before the load');")
	if _, err := s.Load(ctx, LoadOptions{Rows: map[string][]map[string]any{"artists": {{"name": "Loaded"}}}}); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, rec, "Load after a local write", "PUT database application/vnd.sqlite3; POST fixtures; GET database")
	if got := count(); got != "6" {
		t.Errorf("the copy after Load has %s artists, want 6 (4, the local write, the loaded row)", got)
	}
	if _, err := s.Load(ctx, LoadOptions{SQL: "INSERT INTO artists (name) VALUES ('Loaded by SQL')"}); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, rec, "Load", "POST fixtures; GET database")
	if got := count(); got != "7" {
		t.Errorf("the copy after the second Load has %s artists, want 7", got)
	}

	before, err := os.Stat(s.Path)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.Query(ctx, "SELECT count(*) FROM artists"); err != nil || r.Rows[0][0] != int64(7) {
		t.Errorf("read-only query: %+v, %v", r, err)
	}
	wantCalls(t, rec, "a read-only Query", "POST query")
	if after, err := os.Stat(s.Path); err != nil || !os.SameFile(before, after) {
		t.Errorf("a read-only query replaced the copy")
	}
	sqlite(t, s.Path, "DELETE FROM artists WHERE name = 'Loaded';")
	if r, err := s.Query(ctx, "UPDATE artists SET born = 1900 WHERE born IS NULL"); err != nil || r.Changes != 2 {
		t.Errorf("update query: %+v, %v; want 2 changes (the rows added since, less the one the copy deleted)", r, err)
	}
	wantCalls(t, rec, "a Query that changes rows after a local write", "PUT database application/vnd.sqlite3; POST query; GET database")
	if got := sqlite(t, s.Path, "SELECT count(*) FROM artists WHERE born = 1900;"); got != "2" {
		t.Errorf("the copy after the update has %s rows born 1900, want 2", got)
	}

	m, err := s.Migrate(ctx, "")
	if err != nil || len(m.Applied) != 1 {
		t.Fatalf("Migrate: %+v, %v; want 0006 applied", m, err)
	}
	wantCalls(t, rec, "Migrate", "POST migrate; GET database")
	if got := sqlite(t, s.Path, "SELECT count(*) FROM sqlite_master WHERE name = 'artist_artwork_counts';"); got != "1" {
		t.Errorf("the copy after Migrate lacks version 6's view")
	}
	if _, err := s.Migrate(ctx, "latest"); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, rec, "Migrate with nothing to run", "POST migrate")

	// Reset drops the copy's changes, -wal included: no check-in.
	sqlite(t, s.Path, ".dbconfig no_ckpt_on_close on\nPRAGMA journal_mode=WAL;\nINSERT INTO artists (name) VALUES ('Dropped');")
	if err := s.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, rec, "Reset", "POST reset; GET database")
	if got := count(); got != "4" {
		t.Errorf("the copy after Reset has %s artists, want 4", got)
	}
	if s.Info.Version != "5" || s.Info.Counts["artists"] != 4 {
		t.Errorf("Info after Reset: version %q counts %v", s.Info.Version, s.Info.Counts)
	}
	for _, f := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(s.Path + f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("store.sqlite%s after Reset: %v, want it gone", f, err)
		}
	}
	wantLocalCopy(t, s)

	// A failed call leaves the copy as it was.
	if _, err := s.Query(ctx, "INSERT INTO no_such_table VALUES (1)"); err == nil {
		t.Error("a bad query: no error")
	}
	wantCalls(t, rec, "a bad Query", "POST query")
}

// The app-migrated check in remote mode: the upload comes back as a local
// copy, the app's migrator runs on it, and the copy is checked in before the
// server judges it.
func TestRemoteCheckSnapshot(t *testing.T) {
	ctx := testenv.Context(t)
	c, rec := remoteClient(t)
	// The reference: a database the same migrator made, uploaded.
	refFile := filepath.Join(t.TempDir(), "reference.sqlite")
	if err := testenv.AppMigrator(t, testenv.NotesMigrations["good"])(ctx, refFile); err != nil {
		t.Fatal(err)
	}
	ref, err := c.Upload(ctx, refFile, UploadOptions{Label: "reference"})
	if err != nil {
		t.Fatal(err)
	}
	wantLocalCopy(t, ref)
	t.Cleanup(func() { _ = ref.Delete(testenv.Context(t)) })
	against := Reference{Store: ref.ID}
	dir := testenv.SnapshotsDir(t, v1Expect)
	v1 := filepath.Join(dir, "v1.sqlite")

	// app is the app's migrator of kind, recording where it ran, then
	// failing with fail (unless nil).
	var ranOn []string
	app := func(kind string, fail error) SnapshotOptions {
		migrate := testenv.AppMigrator(t, testenv.NotesMigrations[kind])
		return SnapshotOptions{Against: against, Migrate: func(ctx context.Context, path string) error {
			ranOn = append(ranOn, path)
			if _, err := os.Stat(path); err != nil {
				t.Errorf("the migrator's path %s: %v", path, err)
			}
			if err := migrate(ctx, path); err != nil {
				return err
			}
			return fail
		}}
	}
	// lastCopyGone checks that the migrator ran on a local copy, since removed.
	lastCopyGone := func() {
		t.Helper()
		if len(ranOn) == 0 {
			t.Fatal("the migrator did not run")
		}
		path := ranOn[len(ranOn)-1]
		if filepath.Base(path) != "store.sqlite" || !strings.HasPrefix(filepath.Base(filepath.Dir(path)), "larder-remote-") {
			t.Errorf("the migrator ran on %s, want a local copy larder-remote-XXXX/store.sqlite", path)
		}
		if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the local copy's folder after CheckSnapshot: %v, want it gone", err)
		}
	}
	getStore := func(id string) (*Store, error) { return c.GetStore(ctx, id) } // no local copy: Info only

	// Passes only if the migrated copy was checked in: the upload is at 0001.
	rec.take()
	r, err := c.CheckSnapshot(ctx, v1, app("good", nil))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Passed || r.FromVersion != "0001" || r.ToVersion != "0002" || r.Kept {
		t.Errorf("v1.sqlite with the good migrator: %s", r)
	}
	wantCalls(t, rec, "CheckSnapshot", "POST stores application/vnd.sqlite3; GET database; PUT database application/vnd.sqlite3; POST check; DELETE "+r.StoreID)
	lastCopyGone()
	if _, err := getStore(r.StoreID); !IsNotFound(err) {
		t.Errorf("the passed store %s: %v, want it deleted", r.StoreID, err)
	}

	// A migrator that leaves an index behind: failed, kept as migrated.
	r, err = c.CheckSnapshot(ctx, v1, app("forgetful", nil))
	if err != nil {
		t.Fatal(err)
	}
	if r.Passed || !r.Kept || len(r.Failures) != 1 || !strings.HasPrefix(r.Failures[0], "schema differs from the reference: index notes_tag on notes ") {
		t.Errorf("v1.sqlite with the forgetful migrator: %s\nwant one failure naming index notes_tag", r)
	}
	lastCopyGone()
	kept, err := getStore(r.StoreID)
	if err != nil || !kept.Info.Keep {
		t.Errorf("the failed store %s: %+v, %v; want it kept", r.StoreID, kept, err)
	} else {
		_ = kept.Delete(ctx)
	}

	// A migrator that fails after migrating: kept as it left the copy.
	boom := errors.New("boom")
	_, err = c.CheckSnapshot(ctx, v1, app("good", boom))
	m := regexp.MustCompile(`^larder: v1\.sqlite: the migrator failed on store (st_\w+) \(kept\): boom$`).FindStringSubmatch(fmt.Sprint(err))
	if !errors.Is(err, boom) || m == nil {
		t.Fatalf("%v, want the migrator's error wrapped, naming the kept store", err)
	}
	lastCopyGone()
	kept, err = getStore(m[1])
	if err != nil || !kept.Info.Keep {
		t.Fatalf("the store of the failed migrator %s: %+v, %v; want it kept", m[1], kept, err)
	}
	defer kept.Delete(ctx)
	if q, err := kept.Query(ctx, "SELECT version_num FROM alembic_version"); err != nil || len(q.Rows) != 1 || q.Rows[0][0] != "0002" {
		t.Errorf("the kept store's alembic_version: %+v, %v; want 0002, as the migrator left its copy", q, err)
	}
}

func TestModeResolution(t *testing.T) {
	for _, c := range []struct {
		env, url string
		mode     Mode
		want     Mode
	}{
		{"", "http://127.0.0.1:7464", ModeAuto, ModeLocal},
		{"", "http://127.42.0.9:80", ModeAuto, ModeLocal},
		{"", "http://localhost:7464", ModeAuto, ModeLocal},
		{"", "http://LocalHost.", ModeAuto, ModeLocal},
		{"", "http://[::1]:7464/", ModeAuto, ModeLocal},
		{"", "http://10.0.0.7:7464", ModeAuto, ModeRemote},
		{"", "https://larder.ci.example.com", ModeAuto, ModeRemote},
		{"", "http://[2001:db8::1]:7464", ModeAuto, ModeRemote},
		{"", "http://0.0.0.0:7464", ModeAuto, ModeRemote},
		{"", "http://host.docker.internal:7464", ModeAuto, ModeRemote},
		{"remote", "http://127.0.0.1:7464", ModeAuto, ModeRemote},
		{"local", "https://larder.ci.example.com", ModeAuto, ModeLocal},
		{"remote", "http://127.0.0.1:7464", ModeLocal, ModeLocal},      // the option beats the variable
		{"local", "http://127.0.0.1:7464", ModeRemote, ModeRemote},     // the option beats the variable
		{"sometimes", "http://127.0.0.1:7464", ModeRemote, ModeRemote}, // not even read
		{"", "https://larder.ci.example.com", ModeLocal, ModeLocal},    // the option beats the URL
	} {
		t.Setenv("LARDER_MODE", c.env)
		client := New(c.url, "")
		client.Mode = c.mode
		if got, err := client.ResolveMode(); err != nil || got != c.want {
			t.Errorf("LARDER_MODE=%q, URL %s, Mode %q: %q, %v; want %q", c.env, c.url, c.mode, got, err, c.want)
		}
	}

	// Anything else is an error that names the variable and its two values,
	// and nothing is made.
	t.Setenv("LARDER_MODE", "Remote")
	client := FromEnvironment()
	_, err := client.ResolveMode()
	if err == nil || !strings.Contains(err.Error(), "LARDER_MODE") || !strings.Contains(err.Error(), `"remote"`) || !strings.Contains(err.Error(), `"local"`) {
		t.Errorf("LARDER_MODE=Remote: %v, want an error naming LARDER_MODE, \"remote\" and \"local\"", err)
	}
	ctx := testenv.Context(t)
	if s, err2 := client.CreateStore(ctx, StoreOptions{Template: "gallery"}); err2 == nil || err2.Error() != err.Error() {
		t.Errorf("CreateStore with LARDER_MODE=Remote: %v, %v; want %v", s, err2, err)
	}
	if s, err2 := client.Upload(ctx, "no-such-file.sqlite"); err2 == nil || err2.Error() != err.Error() {
		t.Errorf("Upload with LARDER_MODE=Remote: %v, %v; want %v", s, err2, err)
	}
	client.Mode = "sometimes"
	if _, err := client.ResolveMode(); err == nil || !strings.Contains(err.Error(), "Client.Mode") {
		t.Errorf("Mode \"sometimes\": %v, want an error", err)
	}
	if m, err := parseMode(""); m != ModeAuto || err != nil {
		t.Errorf("parseMode(\"\") = %q, %v", m, err)
	}
}

// onConflict sends requests and, on the first 409 answer, runs release
// before handing it on.
type onConflict struct {
	once    sync.Once
	release func()
	seen    []string
	mu      sync.Mutex
}

func (o *onConflict) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		o.mu.Lock()
		o.seen = append(o.seen, fmt.Sprintf("%s %s %d", req.Method, filepath.Base(req.URL.Path), resp.StatusCode))
		o.mu.Unlock()
		if resp.StatusCode == http.StatusConflict {
			o.once.Do(o.release)
		}
	}
	return resp, err
}

// While something holds a write transaction on the server's store, the
// server answers a check-in 409 "conflict"; CheckIn asks again, as
// Retry-After says, and the copy arrives. The server here is the tests'
// visible one, in remote mode, so that a sqlite3 shell can hold the
// transaction on the server's file; it commits on the first 409.
func TestRemoteCheckInWaitsForAWriteTransaction(t *testing.T) {
	ctx := testenv.Context(t)
	shell := testenv.SQLite3(t)
	transport := &onConflict{}
	c := FromEnvironment()
	c.Mode = ModeRemote
	c.HTTPClient = &http.Client{Transport: transport, Timeout: time.Minute}
	s, err := c.CreateStore(ctx, StoreOptions{Template: "gallery", Fixtures: []string{"artists"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Delete(testenv.Context(t)) })
	if !s.Remote() || s.Path == s.Info.Path {
		t.Fatalf("store %s: Remote %v, Path %s, Info.Path %s; want a local copy", s.ID, s.Remote(), s.Path, s.Info.Path)
	}
	sqlite(t, s.Path, "INSERT INTO artists (name) VALUES ('Checked in after the commit');")

	holder := exec.Command(shell, "-bail", s.Info.Path)
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, "BEGIN IMMEDIATE;\nINSERT INTO artists (name) VALUES ('Overwritten');\nSELECT 'begun';\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || strings.TrimSpace(line) != "begun" {
		t.Fatalf("sqlite3 did not begin: %q %v", line, err)
	}
	committed := make(chan error, 1)
	transport.release = func() {
		_, err := io.WriteString(stdin, "COMMIT;\n")
		stdin.Close()
		if werr := holder.Wait(); err == nil {
			err = werr
		}
		committed <- err
	}
	t.Cleanup(func() { transport.once.Do(transport.release) })

	if err := s.CheckIn(ctx); err != nil {
		t.Fatalf("CheckIn: %v (requests: %v)", err, transport.seen)
	}
	if err := <-committed; err != nil {
		t.Fatalf("the transaction: %v", err)
	}
	puts := 0
	for _, r := range transport.seen {
		if strings.HasPrefix(r, "PUT ") {
			puts++
		}
	}
	if puts < 2 || transport.seen[len(transport.seen)-1] != "PUT database 200" {
		t.Errorf("requests %v, want a PUT answered 409, then one answered 200", transport.seen)
	}
	r, err := s.Query(ctx, "SELECT name FROM artists ORDER BY id DESC LIMIT 1")
	if err != nil || r.Rows[0][0] != "Checked in after the commit" {
		t.Errorf("the server's last artist: %+v, %v; want the copy's", r, err)
	}
}

// A build this client would make is handed back: its migrator would write
// the server's file.
func TestRemoteBuildIsHandedBack(t *testing.T) {
	client, _ := remoteClient(t)
	ran := false
	_, err := client.Build(context.Background(), "remote-build-refused", func(ctx context.Context, path string) error {
		ran = true
		return nil
	})
	var e *Error
	if !errors.As(err, &e) || e.Code != "remote_mode" {
		t.Fatalf("Build in remote mode: %v, want a remote_mode error", err)
	}
	if ran {
		t.Fatal("the migrator ran on the server's path")
	}
	if _, err := client.GetBuild(context.Background(), "remote-build-refused"); !IsNotFound(err) {
		t.Fatalf("the claim was not handed back: %v", err)
	}
}
