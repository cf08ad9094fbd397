// Package one is half of the selfstart sample (see package record): a test
// that passes, whose store must be deleted.
package one

import (
	"context"
	"os"
	"testing"

	"github.com/larder-dev/larder/clients/go/larder"
	"github.com/larder-dev/larder/clients/go/larder/lardertest"
	"selfstart/record"
)

func TestMain(m *testing.M) {
	record.Setup()
	os.Exit(m.Run())
}

var passed string // TestPasses's store

func TestPasses(t *testing.T) {
	store := record.StoreForTest(t, "one", larder.StoreOptions{Template: "gallery", Fixtures: []string{"artists"}})
	passed = store.ID
	counts, err := store.Counts(context.Background(), "artists")
	if err != nil {
		t.Fatal(err)
	}
	if counts["artists"] != 4 {
		t.Errorf("artists = %d, want 4", counts["artists"])
	}
}

func TestThePassedStoreIsDeleted(t *testing.T) {
	if passed == "" {
		t.Skip("TestPasses did not run")
	}
	client, err := lardertest.TestClient()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.GetStore(context.Background(), passed); !larder.IsNotFound(err) {
		t.Errorf("the passed test's store %s: %v, want 404", passed, err)
	}
}

// TestNamedAlike has a namesake in package two: the two stores' labels
// differ by their packages (selfstart/one/TestNamedAlike,
// selfstart/two/TestNamedAlike).
func TestNamedAlike(t *testing.T) {
	record.StoreForTest(t, "one", larder.StoreOptions{Template: "gallery"})
}
