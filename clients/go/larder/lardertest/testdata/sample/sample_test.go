// A sample package whose tests use lardertest.StoreForTest; sample_run_test.go
// (in the package above) runs `go test` on it. TestPasses passes, and its
// store must be deleted; TestFails/deliberately fails, and its store must be
// kept with its artifact saved.
package sample

import (
	"context"
	"testing"

	"github.com/larder-dev/larder/clients/go/larder"
	"github.com/larder-dev/larder/clients/go/larder/lardertest"
)

func TestPasses(t *testing.T) {
	store := lardertest.StoreForTest(t, larder.StoreOptions{Template: "gallery", Fixtures: []string{"artists"}})
	t.Logf("SAMPLE_STORE %s %s", t.Name(), store.ID)
	counts, err := store.Counts(context.Background(), "artists")
	if err != nil {
		t.Fatal(err)
	}
	if counts["artists"] != 4 {
		t.Errorf("artists = %d, want 4", counts["artists"])
	}
}

func TestFails(t *testing.T) {
	t.Run("deliberately", func(t *testing.T) {
		store := lardertest.StoreForTest(t, larder.StoreOptions{Template: "gallery", Fixtures: []string{"artists", "artworks"}})
		t.Logf("SAMPLE_STORE %s %s", t.Name(), store.ID)
		ctx := context.Background()
		if _, err := store.Query(ctx, "INSERT INTO artists (name) VALUES (?)", "Left behind"); err != nil {
			t.Fatal(err)
		}
		counts, err := store.Counts(ctx, "artists")
		if err != nil {
			t.Fatal(err)
		}
		if counts["artists"] != 4 {
			t.Errorf("artists = %d, want 4 (this test fails on purpose)", counts["artists"])
		}
	})
}
