package larder

import (
	"os"
	"strings"
	"testing"

	"github.com/larder-dev/larder/clients/go/internal/testenv"
)

// TestImportsNoTesting: a program that uses the client does not link the
// testing package; its test helpers are lardertest's.
func TestImportsNoTesting(t *testing.T) {
	out, err := testenv.Go(t, ".", os.Environ(), "list", "-deps", "-f", "{{.ImportPath}}", ".")
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(out) {
		if pkg == "testing" || strings.HasPrefix(pkg, "testing/") {
			t.Errorf("package larder depends on %s: keep what needs it in lardertest", pkg)
		}
	}
}
