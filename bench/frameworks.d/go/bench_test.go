// bench/frameworks' Go suites: LARDER_BENCH_TESTS subtests (t.Run) of one
// test function per variant, run with `go test -run '^TestVARIANT$'`, so
// that every variant runs the same test binary.
package bench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/larder-dev/larder/clients/go/larder"
	"github.com/larder-dev/larder/clients/go/larder/lardertest"
)

// TestMain lets lardertest.StoreForTest work ahead of the tests, as its
// documentation asks a package to: the next store made while a test runs, a
// passing test's store deleted in the background (issue 48).
func TestMain(m *testing.M) {
	os.Exit(lardertest.Main(m))
}

func tests(t *testing.T) int {
	n, err := strconv.Atoi(os.Getenv("LARDER_BENCH_TESTS"))
	if err != nil || n < 1 {
		t.Fatalf("LARDER_BENCH_TESTS: %q", os.Getenv("LARDER_BENCH_TESTS"))
	}
	return n
}

func name(i int) string { return fmt.Sprintf("t%04d", i) }

func TestEmpty(t *testing.T) {
	for i, n := 1, tests(t); i <= n; i++ {
		t.Run(name(i), func(t *testing.T) {})
	}
}

func TestNaive(t *testing.T) {
	template := os.Getenv("LARDER_BENCH_TEMPLATE")
	for i, n := 1, tests(t); i <= n; i++ {
		t.Run(name(i), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store.sqlite")
			copyFile(t, template, path)
			write(t, path)
		})
	}
}

func TestLarder(t *testing.T) {
	for i, n := 1, tests(t); i <= n; i++ {
		t.Run(name(i), func(t *testing.T) {
			store := lardertest.StoreForTest(t, larder.StoreOptions{Template: "gallery", Fixtures: []string{"artists", "artworks"}})
			write(t, store.Path)
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
