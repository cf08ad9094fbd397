// SPDX-License-Identifier: Apache-2.0

package lardertest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/larder-dev/larder/clients/go/larder"
)

// CheckSnapshots runs one subtest of t per *.sqlite file of dir (t.Run with
// the file's name, in file name order), each checking its file with
// Client.CheckSnapshot and opts, on the server of TestClient (the one
// StoreForTest uses), its store labelled as StoreForTest labels a test's
// (RUN/PACKAGE/TEST, TEST the subtest's name, e.g.
// TestMigrations/v1.sqlite), so that a kept one goes with its run. A
// snapshot that fails fails its subtest with the result's String: the
// snapshot, its versions, the kept store and every failure on a line of its
// own. A dir without *.sqlite files fails t, lest a mistyped path pass; so
// do an Expect or Label in opts.
func CheckSnapshots(t *testing.T, dir string, opts larder.SnapshotOptions) {
	t.Helper()
	if opts.Expect != nil || opts.Label != "" {
		t.Fatal("larder: Expect and Label are per snapshot (each NAME.sqlite has its own NAME.expect.json): use Client.CheckSnapshot for one file")
	}
	files, err := larder.SnapshotFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		abs, _ := filepath.Abs(dir)
		t.Fatalf("larder: no *.sqlite file in %s", abs)
	}
	client, err := TestClient()
	if err != nil {
		t.Fatal(err)
	}
	pkg := testPackage() // found here: the subtests run a function of package lardertest
	for _, f := range files {
		path := filepath.Join(dir, f)
		t.Run(f, func(t *testing.T) {
			opts := opts
			opts.Label = testLabel(pkg, t.Name())
			r, err := client.CheckSnapshot(context.Background(), path, opts)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Passed {
				t.Error(r.String())
			}
		})
	}
}
