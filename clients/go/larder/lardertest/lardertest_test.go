package lardertest

import (
	"os"
	"strings"
	"testing"

	"github.com/larder-dev/larder/clients/go/internal/testenv"
	"github.com/larder-dev/larder/clients/go/larder"
)

// The tests run against a real server that TestMain starts (testenv.Run),
// but for a child of TestBackToBackRunsWhileTheServerStops: its server is
// the one `larder up` gives.
func TestMain(m *testing.M) {
	if os.Getenv(upChildEnv) != "" {
		os.Exit(m.Run())
	}
	os.Exit(testenv.Run(m))
}

// newStore makes a store on the tests' server, deleted when the test ends.
func newStore(t *testing.T, opts larder.StoreOptions) *larder.Store {
	t.Helper()
	s, err := larder.FromEnvironment().CreateStore(testenv.Context(t), opts)
	if err != nil {
		t.Fatalf("CreateStore(%+v): %v", opts, err)
	}
	t.Cleanup(func() {
		if err := s.Delete(testenv.Context(t)); err != nil && !larder.IsNotFound(err) {
			t.Errorf("deleting %s: %v", s.ID, err)
		}
	})
	return s
}

func TestFileSafeName(t *testing.T) {
	for in, want := range map[string]string{
		"TestA":                  "TestA",
		"TestA/sub_case#01":      "TestA_sub_case_01",
		"TestB/élan: a/b\\c":     "TestB__lan__a_b_c",
		"../up":                  "_up",
		"":                       "test",
		strings.Repeat("x", 300): strings.Repeat("x", 120),
	} {
		if got := FileSafeName(in); got != want {
			t.Errorf("FileSafeName(%q) = %q, want %q", in, got, want)
		}
	}
}
