package larder

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLicenseIsTheRepositorys checks that LICENSE and NOTICE, which the
// module zip (and so the module proxy and pkg.go.dev) needs in the module's
// own folder, are byte-for-byte copies of the repository's.
func TestLicenseIsTheRepositorys(t *testing.T) {
	for _, name := range []string{"LICENSE", "NOTICE"} {
		ours, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := os.ReadFile(filepath.Join("..", "..", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ours, theirs) {
			t.Errorf("clients/go/%s differs from the repository's %s: copy it (cp %s clients/go/%s)", name, name, name, name)
		}
	}
}

// TestSourcesNameTheLicense checks that each .go file of the package but
// its tests starts with the SPDX line.
func TestSourcesNameTheLicense(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, []byte("// SPDX-License-Identifier: Apache-2.0\n")) {
			t.Errorf("%s does not start with // SPDX-License-Identifier: Apache-2.0", f)
		}
	}
}
