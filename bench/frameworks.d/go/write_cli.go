//go:build benchcli

package bench

import (
	"os/exec"
	"testing"
)

// write inserts one row with the sqlite3 command-line tool: `go test -tags benchcli`, where
// github.com/mattn/go-sqlite3 cannot be had.
func write(t *testing.T, path string) {
	if out, err := exec.Command("sqlite3", path, "INSERT INTO albums (title) VALUES ('Summer')").CombinedOutput(); err != nil {
		t.Fatalf("sqlite3: %v %s", err, out)
	}
}
