// A sample package whose tests use lardertest.StoreForTest in remote mode
// (LARDER_MODE=remote), writing to their stores' local copies with the
// sqlite3 shell; remote_run_test.go (in the package above) runs `go test`
// on it against a server whose files it cannot open. TestPasses passes: its
// store must be deleted, with no upload. TestFails/deliberately fails: its
// copy must be checked in, the store kept and its artifact saved with what
// it wrote. TestFailsWithABrokenCopy fails with a copy the server refuses:
// its store must be kept as it was made, the check-in's failure told.
package remote

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/larder-dev/larder/clients/go/larder"
	"github.com/larder-dev/larder/clients/go/larder/lardertest"
)

// write runs sql on the file at path with the sqlite3 shell, as the code
// under test would with its own driver.
func write(t *testing.T, path, sql string) {
	t.Helper()
	cmd := exec.CommandContext(context.Background(), "sqlite3", "-bail", path)
	cmd.Stdin = strings.NewReader(sql)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sqlite3: %v: %s", err, bytes.TrimSpace(out))
	}
}

// remoteStore is the test's store, checked to be a local copy.
func remoteStore(t *testing.T) *larder.Store {
	t.Helper()
	store := lardertest.StoreForTest(t, larder.StoreOptions{Template: "gallery", Fixtures: []string{"artists"}})
	t.Logf("SAMPLE_STORE %s %s %s", t.Name(), store.ID, store.Path)
	if !store.Remote() {
		t.Fatalf("store %s is not remote (LARDER_MODE=%q)", store.ID, os.Getenv("LARDER_MODE"))
	}
	if _, err := os.Stat(store.Info.Path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the server's file %s: %v; the sample's server must be out of reach", store.Info.Path, err)
	}
	return store
}

func TestPasses(t *testing.T) {
	store := remoteStore(t)
	write(t, store.Path, "INSERT INTO artists (name) VALUES ('Never uploaded');")
}

func TestFails(t *testing.T) {
	t.Run("deliberately", func(t *testing.T) {
		store := remoteStore(t)
		// The last write stays in the -wal: the check-in sends both.
		write(t, store.Path, ".dbconfig no_ckpt_on_close on\nPRAGMA journal_mode=WAL;\nINSERT INTO artists (name) VALUES ('Left behind');")
		t.Errorf("this test fails on purpose")
	})
}

func TestFailsWithABrokenCopy(t *testing.T) {
	store := remoteStore(t)
	if err := os.WriteFile(store.Path, []byte("not a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Errorf("this test fails on purpose, its copy broken")
}
