// A sample package whose test uses lardertest.CheckSnapshots;
// snapshots_test.go (in the package above) runs `go test` on it with
// SAMPLE_SNAPSHOTS (a directory of old databases), SAMPLE_BUILD (the
// reference build's key) and SAMPLE_MIGRATIONS (the app's migrations, as
// JSON [{"version", "sql"}]): the sqlite3 shell plays the app's migrator.
package appcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/larder-dev/larder/clients/go/larder"
	"github.com/larder-dev/larder/clients/go/larder/lardertest"
)

type migration struct {
	Version string `json:"version"`
	SQL     string `json:"sql"`
}

// migrate brings the database at path from the version its alembic_version
// names up to the last of steps.
func migrate(steps []migration) func(ctx context.Context, path string) error {
	run := func(ctx context.Context, path, sql string) (string, error) {
		cmd := exec.CommandContext(ctx, "sqlite3", "-bail", path)
		cmd.Stdin = strings.NewReader(sql)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("sqlite3: %w: %s", err, errOut.String())
		}
		return strings.TrimSpace(out.String()), nil
	}
	return func(ctx context.Context, path string) error {
		current, err := run(ctx, path, "CREATE TABLE IF NOT EXISTS alembic_version (version_num TEXT NOT NULL); SELECT version_num FROM alembic_version;")
		if err != nil {
			return err
		}
		for _, m := range steps {
			if current != "" && m.Version <= current {
				continue
			}
			sql := fmt.Sprintf("BEGIN; %s DELETE FROM alembic_version; INSERT INTO alembic_version VALUES ('%s'); COMMIT;", m.SQL, m.Version)
			if _, err := run(ctx, path, sql); err != nil {
				return err
			}
		}
		return nil
	}
}

func TestMigrations(t *testing.T) {
	dir := os.Getenv("SAMPLE_SNAPSHOTS")
	if dir == "" {
		t.Skip("run by package lardertest's TestCheckSnapshotsInASubprocess")
	}
	var steps []migration
	if err := json.Unmarshal([]byte(os.Getenv("SAMPLE_MIGRATIONS")), &steps); err != nil {
		t.Fatal(err)
	}
	lardertest.CheckSnapshots(t, dir, larder.SnapshotOptions{
		Against: larder.Reference{Build: os.Getenv("SAMPLE_BUILD")},
		Migrate: migrate(steps),
	})
}
