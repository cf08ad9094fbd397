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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/larder-dev/larder/clients/go/internal/testenv"
)

// The app-built template tests play the application's own migrator with
// the sqlite3 shell: it writes the build's file with its own SQLite, as
// Django's, Rails' or golang-migrate's driver would.

// shopSchema is what a Django project's `migrate` would leave: its tables,
// rows from a data migration, and django_migrations naming what ran.
const shopSchema = `
CREATE TABLE django_migrations (id integer NOT NULL PRIMARY KEY AUTOINCREMENT, app varchar(255) NOT NULL, name varchar(255) NOT NULL, applied datetime NOT NULL);
INSERT INTO django_migrations (app, name, applied) VALUES
  ('contenttypes', '0001_initial', '2024-06-13 06:11:02'),
  ('shop', '0001_initial', '2024-06-13 06:11:02'),
  ('shop', '0002_item_price', '2024-06-13 06:11:03');
CREATE TABLE shop_item (id integer NOT NULL PRIMARY KEY AUTOINCREMENT, name varchar(100) NOT NULL, price integer NOT NULL);
INSERT INTO shop_item (name, price) VALUES ('Kettle', 30), ('Teapot', 25), ('Mug', 8);
`

// sqlite3Migrator is a migrate function that runs sql in the build's file
// with the sqlite3 shell, stopping at the first error.
func sqlite3Migrator(t *testing.T, sql string) func(ctx context.Context, path string) error {
	shell := testenv.SQLite3(t)
	return func(ctx context.Context, path string) error {
		cmd := exec.CommandContext(ctx, shell, "-bail", path)
		cmd.Stdin = strings.NewReader(sql)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("sqlite3: %w: %s", err, bytes.TrimSpace(out))
		}
		return nil
	}
}

// buildKey is a key of the test's own, discarded when the test ends.
func buildKey(t *testing.T) string {
	key := testenv.BuildKey(t)
	t.Cleanup(func() {
		if err := FromEnvironment().DiscardBuild(testenv.Context(t), key); err != nil && !IsNotFound(err) {
			t.Errorf("discarding build %s: %v", key, err)
		}
	})
	return key
}

// itemNames are the names in shop_item of s, by id.
func itemNames(t *testing.T, s *Store) string {
	t.Helper()
	r, err := s.Query(testenv.Context(t), "SELECT name FROM shop_item ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(r.Rows))
	for i, row := range r.Rows {
		names[i], _ = row[0].(string)
	}
	return strings.Join(names, ",")
}

func TestBuildThenStoresFromIt(t *testing.T) {
	ctx := testenv.Context(t)
	client := FromEnvironment()
	key := buildKey(t)
	var calls atomic.Int32
	var builtIn string
	migrate := sqlite3Migrator(t, shopSchema)
	info, err := client.Build(ctx, key, func(ctx context.Context, path string) error {
		calls.Add(1)
		builtIn = path
		if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
			t.Errorf("the path to build in, %q, is not a file: %v", path, err)
		}
		return migrate(ctx, path)
	}, BuildOptions{Label: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 1 || builtIn == "" {
		t.Fatalf("migrate ran %d times (path %q), want once", calls.Load(), builtIn)
	}
	if info.Key != key || info.State != "ready" || info.Label != t.Name() || info.Version != "" || info.SizeBytes <= 0 || info.FinishedAt.IsZero() {
		t.Errorf("Build = %+v", info)
	}
	// Django's bookkeeping is no user table; sqlite_sequence neither.
	if len(info.Counts) != 1 || info.Counts["shop_item"] != 3 {
		t.Errorf("Build counts = %v, want only shop_item: 3", info.Counts)
	}
	if info.Raw["links"] == nil {
		t.Errorf("Raw = %v", info.Raw)
	}

	got, err := client.GetBuild(ctx, key)
	if err != nil || got.State != "ready" || got.Counts["shop_item"] != 3 || got.Path != "" {
		t.Errorf("GetBuild = %+v, %v", got, err)
	}
	all, err := client.Builds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, b := range all {
		found = found || (b.Key == key && b.State == "ready")
	}
	if !found {
		t.Errorf("Builds() = %+v, lacks %s", all, key)
	}
	// Built already: answered at once, migrate not run again.
	again, err := client.Build(ctx, key, func(context.Context, string) error {
		calls.Add(1)
		return errors.New("must not run")
	})
	if err != nil || again.Key != key || again.State != "ready" || calls.Load() != 1 {
		t.Errorf("Build of a ready key = %+v, %v; migrate ran %d times", again, err, calls.Load())
	}

	a := newStore(t, StoreOptions{Build: key, BuildTimeout: 10 * time.Second, Label: t.Name()})
	b := newStore(t, StoreOptions{Build: key})
	for _, s := range []*Store{a, b} {
		if s.Info.Build != key || s.Info.Version != "" || s.Path == builtIn {
			t.Errorf("store %s: build %q version %q path %q", s.ID, s.Info.Build, s.Info.Version, s.Path)
		}
		wantCounts(t, s.Info.Counts, map[string]int64{"shop_item": 3})
		if names := itemNames(t, s); names != "Kettle,Teapot,Mug" {
			t.Errorf("store %s items = %s", s.ID, names)
		}
		r, err := s.Query(ctx, "SELECT count(*) FROM django_migrations WHERE app = 'shop'")
		if err != nil || r.Rows[0][0] != int64(2) {
			t.Errorf("store %s django_migrations: %v, %v", s.ID, r, err)
		}
	}
	if a.Path == b.Path {
		t.Fatalf("both stores are at %s", a.Path)
	}

	// Each store is a copy of its own: a write to one is not in the other.
	if _, err := a.Query(ctx, "INSERT INTO shop_item (name, price) VALUES ('Spoon', 2)"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Query(ctx, "DELETE FROM shop_item WHERE name = 'Mug'"); err != nil {
		t.Fatal(err)
	}
	ca, err := a.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := b.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantCounts(t, ca, map[string]int64{"shop_item": 4})
	wantCounts(t, cb, map[string]int64{"shop_item": 2})
	if names := itemNames(t, a); names != "Kettle,Teapot,Mug,Spoon" {
		t.Errorf("store a items = %s", names)
	}
	if names := itemNames(t, b); names != "Kettle,Teapot" {
		t.Errorf("store b items = %s", names)
	}
	// And the build itself is untouched: a new store has the three rows.
	c := newStore(t, StoreOptions{Build: key})
	if names := itemNames(t, c); names != "Kettle,Teapot,Mug" {
		t.Errorf("a third store's items = %s", names)
	}
}

func TestBuildConcurrentCallersBuildOnce(t *testing.T) {
	ctx := testenv.Context(t)
	key := buildKey(t)
	var calls atomic.Int32
	var migrated atomic.Int64 // when migrate finished, in UnixNano
	sqlite3 := sqlite3Migrator(t, shopSchema)
	migrate := func(ctx context.Context, path string) error {
		calls.Add(1)
		time.Sleep(500 * time.Millisecond)
		err := sqlite3(ctx, path)
		migrated.Store(time.Now().UnixNano())
		return err
	}
	start := make(chan struct{})
	type result struct {
		info     *BuildInfo
		err      error
		returned time.Time
	}
	results := make([]result, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			// A client each, as two processes of a CI job would have.
			info, err := FromEnvironment().Build(ctx, key, migrate)
			results[i] = result{info, err, time.Now()}
		}(i)
	}
	began := time.Now()
	close(start)
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("migrate ran %d times, want once", n)
	}
	done := time.Unix(0, migrated.Load())
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("caller %d: %v", i, r.err)
		}
		if r.info.Key != key || r.info.State != "ready" || r.info.Counts["shop_item"] != 3 {
			t.Errorf("caller %d: %+v", i, r.info)
		}
		if r.returned.Before(done) {
			t.Errorf("caller %d returned %v before migrate finished", i, done.Sub(r.returned))
		}
	}
	if elapsed := time.Since(began); elapsed < 500*time.Millisecond {
		t.Errorf("both returned after %v, before the 500 ms migrate", elapsed)
	}
	s := newStore(t, StoreOptions{Build: key})
	wantCounts(t, s.Info.Counts, map[string]int64{"shop_item": 3})
}

func TestBuildMigrateErrorDiscardsTheBuild(t *testing.T) {
	ctx := testenv.Context(t)
	client := FromEnvironment()
	key := buildKey(t)
	// The migrator gets halfway, then fails (sqlite3 -bail exits 1).
	failing := sqlite3Migrator(t, "CREATE TABLE half_done (x); INSERT INTO half_done VALUES (1);\nINSERT INTO no_such_table VALUES (1);\n")
	_, err := client.Build(ctx, key, failing)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(err.Error(), "no such table") || !strings.Contains(err.Error(), key) {
		t.Fatalf("Build with a failing migrator: %v, want the migrator's error", err)
	}
	var e *Error
	if errors.As(err, &e) {
		t.Errorf("a failed migrate is no server error: %v", e)
	}
	_, err = client.GetBuild(ctx, key)
	wantError(t, "GetBuild after a failed migrate", err, 404, "unknown_build")
	_, err = client.CreateStore(ctx, StoreOptions{Build: key})
	wantError(t, "CreateStore of a discarded build", err, 404, "unknown_build")

	// The next Build builds again, from an empty file.
	var calls atomic.Int32
	good := sqlite3Migrator(t, shopSchema)
	info, err := client.Build(ctx, key, func(ctx context.Context, path string) error {
		calls.Add(1)
		return good(ctx, path)
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 1 || info.State != "ready" {
		t.Errorf("the second Build: %+v, migrate ran %d times", info, calls.Load())
	}
	if _, ok := info.Counts["half_done"]; ok || info.Counts["shop_item"] != 3 {
		t.Errorf("counts of the rebuilt build = %v, want shop_item alone (nothing of the failed attempt)", info.Counts)
	}
}

func TestBuildMigratePanicDiscardsTheBuild(t *testing.T) {
	ctx := testenv.Context(t)
	client := FromEnvironment()
	key := buildKey(t)
	func() {
		defer func() {
			if r := recover(); r != "migrator exploded" {
				t.Errorf("recovered %v, want the migrate's panic to go on", r)
			}
		}()
		_, _ = client.Build(ctx, key, func(context.Context, string) error { panic("migrator exploded") })
	}()
	_, err := client.GetBuild(ctx, key)
	wantError(t, "GetBuild after a panicking migrate", err, 404, "unknown_build")
	if _, err := client.Build(ctx, key, sqlite3Migrator(t, shopSchema)); err != nil {
		t.Errorf("Build after the panic: %v", err)
	}
}

func TestBuildWaiterOfAFailedBuilderBuilds(t *testing.T) {
	ctx := testenv.Context(t)
	key := buildKey(t)
	failure := errors.New("the builder's migrator failed")
	claimed := make(chan struct{})
	var builderReturned atomic.Int64
	builderErr := make(chan error, 1)
	go func() {
		_, err := FromEnvironment().Build(ctx, key, func(context.Context, string) error {
			close(claimed)
			time.Sleep(500 * time.Millisecond)
			builderReturned.Store(time.Now().UnixNano())
			return failure
		})
		builderErr <- err
	}()
	select {
	case <-claimed:
	case <-ctx.Done():
		t.Fatal("the builder's migrate never ran")
	}
	// The builder is migrating: this caller waits (202), hears that the
	// build was discarded (404), claims it again (201) and builds.
	var calls atomic.Int32
	var startedAt atomic.Int64
	good := sqlite3Migrator(t, shopSchema)
	info, err := FromEnvironment().Build(ctx, key, func(ctx context.Context, path string) error {
		calls.Add(1)
		startedAt.Store(time.Now().UnixNano())
		return good(ctx, path)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-builderErr; !errors.Is(err, failure) {
		t.Errorf("the builder: %v, want its migrator's error", err)
	}
	if calls.Load() != 1 || info.State != "ready" || info.Counts["shop_item"] != 3 {
		t.Errorf("the waiter: %+v, its migrate ran %d times", info, calls.Load())
	}
	if startedAt.Load() < builderReturned.Load() {
		t.Errorf("the waiter's migrate started before the builder's failed")
	}
}

func TestBuildWaiterTimesOut(t *testing.T) {
	ctx := testenv.Context(t)
	key := buildKey(t)
	release := make(chan struct{})
	var releasing sync.Once
	letGo := func() { releasing.Do(func() { close(release) }) }
	defer letGo()
	claimed := make(chan struct{})
	built := make(chan error, 1)
	sqlite3 := sqlite3Migrator(t, shopSchema)
	go func() {
		_, err := FromEnvironment().Build(ctx, key, func(ctx context.Context, path string) error {
			close(claimed)
			<-release
			return sqlite3(ctx, path)
		})
		built <- err
	}()
	<-claimed

	start := time.Now()
	_, err := FromEnvironment().Build(ctx, key, func(context.Context, string) error {
		t.Error("a waiter's migrate ran")
		return nil
	}, BuildOptions{Timeout: 300 * time.Millisecond})
	var te *TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("Build while another builds, 300 ms: %v (%T), want a *TimeoutError", err, err)
	}
	if te.Timeout != 300*time.Millisecond || !strings.Contains(te.Condition, key) || len(te.Counts) != 0 {
		t.Errorf("TimeoutError = %+v", te)
	}
	if elapsed := time.Since(start); elapsed < 250*time.Millisecond || elapsed > 10*time.Second {
		t.Errorf("timed out after %v, want about 300 ms", elapsed)
	}
	wantError(t, "the timeout's server error", err, 408, "timeout")

	_, err = FromEnvironment().CreateStore(ctx, StoreOptions{Build: key, BuildTimeout: 200 * time.Millisecond})
	wantError(t, "CreateStore while building, 200 ms", err, 408, "timeout")

	// A store asked for while it builds comes once it is built; the HTTP
	// client's own Timeout is stretched by the server-side wait.
	short := FromEnvironment()
	short.HTTPClient = &http.Client{Timeout: 2 * time.Second}
	go func() {
		time.Sleep(3 * time.Second)
		letGo()
	}()
	s, err := short.CreateStore(ctx, StoreOptions{Build: key, BuildTimeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("CreateStore waiting for the build: %v", err)
	}
	t.Cleanup(func() { _ = s.Delete(testenv.Context(t)) })
	if err := <-built; err != nil {
		t.Fatalf("the builder: %v", err)
	}
	wantCounts(t, s.Info.Counts, map[string]int64{"shop_item": 3})
}

func TestBuildWaitsLongerThanTheHTTPClientTimeout(t *testing.T) {
	ctx := testenv.Context(t)
	key := buildKey(t)
	claimed := make(chan struct{})
	built := make(chan error, 1)
	sqlite3 := sqlite3Migrator(t, shopSchema)
	go func() {
		_, err := FromEnvironment().Build(ctx, key, func(ctx context.Context, path string) error {
			close(claimed)
			time.Sleep(1500 * time.Millisecond)
			return sqlite3(ctx, path)
		})
		built <- err
	}()
	<-claimed
	short := FromEnvironment()
	short.HTTPClient = &http.Client{Timeout: 500 * time.Millisecond}
	info, err := short.Build(ctx, key, func(context.Context, string) error { return errors.New("must not run") })
	if err != nil {
		t.Fatalf("a waiter with a 500 ms HTTP client timeout: %v", err)
	}
	if info.State != "ready" {
		t.Errorf("waiter: %+v", info)
	}
	if err := <-built; err != nil {
		t.Fatal(err)
	}
}

func TestBuildFinishWaitsForAnOpenWriteTransaction(t *testing.T) {
	ctx := testenv.Context(t)
	key := buildKey(t)
	shell := testenv.SQLite3(t)
	committed := make(chan error, 1)
	start := time.Now()
	// The migrator returns while a connection of its still holds a write
	// transaction, committed 2.5 s on: finish answers 409 until then.
	info, err := FromEnvironment().Build(ctx, key, func(ctx context.Context, path string) error {
		if err := sqlite3Migrator(t, shopSchema)(ctx, path); err != nil {
			return err
		}
		cmd := exec.Command(shell, "-bail", path)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		if _, err := io.WriteString(stdin, "BEGIN IMMEDIATE;\nINSERT INTO shop_item (name, price) VALUES ('Late', 1);\nSELECT 'begun';\n"); err != nil {
			return err
		}
		if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || strings.TrimSpace(line) != "begun" {
			return fmt.Errorf("sqlite3 did not begin: %q %v", line, err)
		}
		go func() {
			time.Sleep(2500 * time.Millisecond)
			_, err := io.WriteString(stdin, "COMMIT;\n")
			stdin.Close()
			if werr := cmd.Wait(); err == nil {
				err = werr
			}
			committed <- err
		}()
		return nil
	})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if err := <-committed; err != nil {
		t.Fatalf("the late transaction: %v", err)
	}
	if elapsed := time.Since(start); elapsed < 2500*time.Millisecond {
		t.Errorf("finished after %v, before the transaction committed", elapsed)
	}
	if info.Counts["shop_item"] != 4 {
		t.Errorf("counts = %v, want the committed 4th row", info.Counts)
	}
}

func TestBuildErrors(t *testing.T) {
	ctx := testenv.Context(t)
	client := FromEnvironment()
	missing := "no-such-" + buildKey(t)
	_, err := client.CreateStore(ctx, StoreOptions{Build: missing})
	if e := wantError(t, "CreateStore of an unknown build", err, 404, "unknown_build"); e != nil && e.Details["key"] != missing {
		t.Errorf("details = %v", e.Details)
	}
	_, err = client.GetBuild(ctx, missing)
	wantError(t, "GetBuild of an unknown build", err, 404, "unknown_build")
	if !IsNotFound(client.DiscardBuild(ctx, missing)) {
		t.Errorf("DiscardBuild of an unknown build: want a 404")
	}

	ran := false
	_, err = client.Build(ctx, "bad key!", func(context.Context, string) error { ran = true; return nil })
	wantError(t, "Build with a bad key", err, 400, "bad_request")
	_, err = client.Build(ctx, "", func(context.Context, string) error { ran = true; return nil })
	wantError(t, "Build with an empty key", err, 400, "bad_request")
	if ran {
		t.Errorf("migrate ran for a bad key")
	}
	if _, err := client.Build(ctx, buildKey(t), nil); err == nil {
		t.Errorf("Build without a migrate function: no error")
	}

	_, err = client.CreateStore(ctx, StoreOptions{Build: buildKey(t), Template: "gallery"})
	wantError(t, "CreateStore with build and template", err, 400, "bad_request")
	_, err = client.CreateStore(ctx, StoreOptions{BuildTimeout: time.Second})
	wantError(t, "CreateStore with a build timeout but no build", err, 400, "bad_request")
}
