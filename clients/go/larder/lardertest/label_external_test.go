package lardertest_test

import (
	"testing"

	"github.com/larder-dev/larder/clients/go/larder"
	"github.com/larder-dev/larder/clients/go/larder/lardertest"
)

// TestLabelInAnExternalTestPackage: a test of the external test package
// lardertest_test is labelled with the package it tests, as `go test` names it.
func TestLabelInAnExternalTestPackage(t *testing.T) {
	saved := lardertest.TestServer.Run
	lardertest.TestServer.Run = "ext-run"
	t.Cleanup(func() { lardertest.TestServer.Run = saved })
	want := "ext-run/github.com/larder-dev/larder/clients/go/larder/lardertest/TestLabelInAnExternalTestPackage"
	if got := lardertest.TestLabel(t); got != want {
		t.Errorf("TestLabel %q, want %q", got, want)
	}
	if got := lardertest.StoreForTest(t, larder.StoreOptions{Template: "gallery"}).Info.Label; got != want {
		t.Errorf("StoreForTest's label %q, want %q", got, want)
	}
}
