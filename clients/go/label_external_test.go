package larder_test

import (
	"testing"

	larder "github.com/larder-dev/larder/clients/go"
)

// TestLabelInAnExternalTestPackage: a test of the external test package
// larder_test is labelled with the package it tests, as `go test` names it.
func TestLabelInAnExternalTestPackage(t *testing.T) {
	saved := larder.TestServer.Run
	larder.TestServer.Run = "ext-run"
	t.Cleanup(func() { larder.TestServer.Run = saved })
	want := "ext-run/github.com/larder-dev/larder/clients/go/TestLabelInAnExternalTestPackage"
	if got := larder.TestLabel(t); got != want {
		t.Errorf("TestLabel %q, want %q", got, want)
	}
	if got := larder.StoreForTest(t, larder.StoreOptions{Template: "gallery"}).Info.Label; got != want {
		t.Errorf("StoreForTest's label %q, want %q", got, want)
	}
}
