//go:build !benchcli

package bench

import (
	"database/sql"
	"testing"

	_ "github.com/mattn/go-sqlite3"
)

// write inserts one row into the SQLite file at path and commits it (autocommit), with mattn/go-sqlite3.
func write(t *testing.T, path string) {
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("INSERT INTO albums (title) VALUES ('Summer')"); err != nil {
		t.Fatal(err)
	}
}
