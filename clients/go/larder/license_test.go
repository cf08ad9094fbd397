package larder

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/larder-dev/larder/clients/go/internal/testenv"
)

// moduleDir is the folder of the module's go.mod (clients/go).
func moduleDir(t *testing.T) string {
	t.Helper()
	dir, err := testenv.ModuleDir()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestLicenseIsTheRepositorys checks that LICENSE and NOTICE, which the
// module zip (and so the module proxy and pkg.go.dev) needs in the module's
// own folder, are byte-for-byte copies of the repository's.
func TestLicenseIsTheRepositorys(t *testing.T) {
	for _, name := range []string{"LICENSE", "NOTICE"} {
		ours, err := os.ReadFile(filepath.Join(moduleDir(t), name))
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := os.ReadFile(testenv.RepoFile(t, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ours, theirs) {
			t.Errorf("clients/go/%s differs from the repository's %s: copy it (cp %s clients/go/%s)", name, name, name, name)
		}
	}
}

// TestSourcesNameTheLicense checks that each .go file of the module's
// packages but their tests starts with the SPDX line.
func TestSourcesNameTheLicense(t *testing.T) {
	root := moduleDir(t)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.HasPrefix(data, []byte("// SPDX-License-Identifier: Apache-2.0\n")) {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s does not start with // SPDX-License-Identifier: Apache-2.0", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
