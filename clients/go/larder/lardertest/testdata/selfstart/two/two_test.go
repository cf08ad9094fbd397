// Package two is the other half of the selfstart sample (see package
// record): a test that fails on purpose, whose store must be kept, with its
// artifact saved.
package two

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

var failed string // TestFails's store

func TestFails(t *testing.T) {
	store := record.StoreForTest(t, "two", larder.StoreOptions{Template: "gallery", Fixtures: []string{"artists", "artworks"}})
	failed = store.ID
	ctx := context.Background()
	if _, err := store.Query(ctx, "INSERT INTO artists (name) VALUES (?)", "Left behind"); err != nil {
		t.Fatal(err)
	}
	t.Error("this test fails on purpose")
}

func TestTheFailedStoreIsKept(t *testing.T) {
	if failed == "" {
		t.Skip("TestFails did not run")
	}
	client, err := lardertest.TestClient()
	if err != nil {
		t.Fatal(err)
	}
	store, err := client.GetStore(context.Background(), failed)
	if err != nil {
		t.Fatalf("the failed test's store %s: %v", failed, err)
	}
	counts, err := store.Counts(context.Background(), "artists")
	if err != nil {
		t.Fatal(err)
	}
	if !store.Info.Keep || counts["artists"] != 5 {
		t.Errorf("the failed test's store: keep %v, %d artists; want kept, as the test left it (5)", store.Info.Keep, counts["artists"])
	}
}

// TestNamedAlike has a namesake in package one: the two stores' labels
// differ by their packages (selfstart/one/TestNamedAlike,
// selfstart/two/TestNamedAlike).
func TestNamedAlike(t *testing.T) {
	record.StoreForTest(t, "two", larder.StoreOptions{Template: "gallery"})
}
