package lardertest

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/larder-dev/larder/clients/go/larder"
)

// thisPackage is the import path of this package, the PACKAGE of its tests'
// labels.
const thisPackage = "github.com/larder-dev/larder/clients/go/larder/lardertest"

// clearRun empties, for the test t, every variable of runVariables and
// TestServer.Run, whatever the environment the tests run in (a CI system's
// included).
func clearRun(t *testing.T) {
	t.Helper()
	for _, v := range runVariables {
		for _, name := range v {
			if name != "" {
				t.Setenv(name, "")
			}
		}
	}
	saved := TestServer.Run
	TestServer.Run = ""
	t.Cleanup(func() { TestServer.Run = saved })
}

// TestStoreForTestLabels: StoreForTest labels a test's store
// RUN/PACKAGE/TEST, RUN from TestServer.Run, else LARDER_RUN, else a CI
// system's run id (only with its own CI system's variable), else none; the
// server's answer carries the label.
func TestStoreForTestLabels(t *testing.T) {
	clearRun(t)
	label := func(t *testing.T) string {
		t.Helper()
		return StoreForTest(t, larder.StoreOptions{Template: "gallery"}).Info.Label
	}
	cases := []struct {
		name string
		env  map[string]string
		run  string // TestServer.Run
		want string // the prefix before PACKAGE/TEST; "" for none
	}{
		{"LARDER_RUN", map[string]string{"LARDER_RUN": "run-7"}, "", "run-7"},
		{"GitHub Actions", map[string]string{"GITHUB_ACTIONS": "true", "GITHUB_RUN_ID": "123"}, "", "123"},
		{"GitLab CI", map[string]string{"GITLAB_CI": "true", "CI_PIPELINE_ID": "4711"}, "", "4711"},
		{"Buildkite", map[string]string{"BUILDKITE": "true", "BUILDKITE_BUILD_ID": "0190-ab"}, "", "0190-ab"},
		{"Jenkins", map[string]string{"JENKINS_URL": "http://ci/", "BUILD_TAG": "jenkins-shop-12"}, "", "jenkins-shop-12"},
		{"CircleCI", map[string]string{"CIRCLECI": "true", "CIRCLE_WORKFLOW_ID": "wf-1"}, "", "wf-1"},
		{"CI run ids without their CI systems", map[string]string{
			"GITHUB_RUN_ID": "123", "CI_PIPELINE_ID": "4711", "BUILDKITE_BUILD_ID": "0190-ab",
			"BUILD_TAG": "jenkins-shop-12", "CIRCLE_WORKFLOW_ID": "wf-1", "GITLAB_CI": "", "GITHUB_ACTIONS": "",
		}, "", ""},
		{"a CI system without its run id", map[string]string{
			"GITHUB_ACTIONS": "true", "GITHUB_RUN_ID": "", "GITLAB_CI": "true", "CI_PIPELINE_ID": "4711",
		}, "", "4711"},
		{"the first that is set", map[string]string{
			"LARDER_RUN": "mine", "GITHUB_ACTIONS": "true", "GITHUB_RUN_ID": "123",
		}, "", "mine"},
		{"the first CI system", map[string]string{
			"GITLAB_CI": "true", "CI_PIPELINE_ID": "4711", "CIRCLECI": "true", "CIRCLE_WORKFLOW_ID": "wf-1",
		}, "", "4711"},
		{"the option wins", map[string]string{
			"LARDER_RUN": "from-env", "GITHUB_ACTIONS": "true", "GITHUB_RUN_ID": "123",
		}, "from-option", "from-option"},
		{"none", nil, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for name, value := range c.env {
				t.Setenv(name, value)
			}
			TestServer.Run = c.run
			defer func() { TestServer.Run = "" }()
			want := thisPackage + "/" + t.Name()
			if c.want != "" {
				want = c.want + "/" + want
			}
			if got := label(t); got != want {
				t.Errorf("label %q, want %q", got, want)
			}
			if got := TestLabel(t); got != want {
				t.Errorf("TestLabel %q, want %q", got, want)
			}
		})
	}

	t.Run("an explicit label", func(t *testing.T) {
		t.Setenv("LARDER_RUN", "run-7")
		if got := StoreForTest(t, larder.StoreOptions{Template: "gallery", Label: "my label"}).Info.Label; got != "my label" {
			t.Errorf("label %q, want the one given", got)
		}
	})

	t.Run("from a goroutine of the test", func(t *testing.T) {
		t.Setenv("LARDER_RUN", "run-7")
		want := "run-7/" + thisPackage + "/" + t.Name()
		got := make(chan string)
		go func() { got <- TestLabel(t) }()
		if g := <-got; g != want {
			t.Errorf("TestLabel in a goroutine %q, want %q", g, want)
		}
	})

	// 3 bytes a character: 256 bytes fall within one, the cut before it.
	t.Run("long "+strings.Repeat("日本語", 40), func(t *testing.T) {
		t.Setenv("LARDER_RUN", "run-7")
		full := "run-7/" + thisPackage + "/" + t.Name()
		got := label(t)
		if len(full) <= labelMaxBytes || (len(full)-labelMaxBytes)%3 == 0 {
			t.Fatalf("the full label (%d bytes) does not test the cut", len(full))
		}
		if len(got) > labelMaxBytes || len(got) < labelMaxBytes-2 || !utf8.ValidString(got) || !strings.HasPrefix(full, got) {
			t.Errorf("label %q (%d bytes), want the start of %q cut to at most %d bytes at a character boundary", got, len(got), full, labelMaxBytes)
		}
		if TestLabel(t) != got {
			t.Errorf("TestLabel %q, want %q", TestLabel(t), got)
		}
	})
}

func TestCutLabel(t *testing.T) {
	a255 := strings.Repeat("a", 255)
	for _, c := range []struct {
		label string
		max   int
		want  string
	}{
		{"abc", 3, "abc"},
		{"abc", 2, "ab"},
		{"aé", 2, "a"},   // é is 2 bytes
		{"a日", 3, "a"},   // 日 is 3
		{"日", 2, ""},     // not even one character fits
		{"a😀b", 4, "a"},  // 😀 is 4
		{"a😀b", 5, "a😀"}, // ends right after it
		{a255 + "é", labelMaxBytes, a255},
		{a255 + "a", labelMaxBytes, a255 + "a"},
		{a255 + "ab", labelMaxBytes, a255 + "a"},
	} {
		if got := cutLabel(c.label, c.max); got != c.want {
			t.Errorf("cutLabel(%q, %d) = %q, want %q", c.label, c.max, got, c.want)
		}
	}
}

// TestFuncPackage: the package of a function as the runtime names it, the
// linker's escapes undone; an external test package is its package's.
func TestFuncPackage(t *testing.T) {
	for name, want := range map[string]string{
		"github.com/acme/shop/orders.TestCheckout":              "github.com/acme/shop/orders",
		"github.com/acme/shop/orders.TestCheckout.func1":        "github.com/acme/shop/orders",
		"github.com/acme/shop/orders.(*Suite).TestCheckout":     "github.com/acme/shop/orders",
		"github.com/acme/shop/orders_test.TestCheckout.func2.1": "github.com/acme/shop/orders",
		"gopkg.in/yaml%2ev3.TestDecode":                         "gopkg.in/yaml.v3",
		"example.com/a.b/c%2ed_test.TestX":                      "example.com/a.b/c.d",
		"selfstart/one.TestPasses":                              "selfstart/one",
		"main.TestTool":                                         "main",
	} {
		if got := testPackageOf(funcPackage(name)); got != want {
			t.Errorf("the package of %s: %q, want %q", name, got, want)
		}
	}
	if got := funcPackage("nodot"); got != "" {
		t.Errorf("funcPackage(nodot) = %q, want none", got)
	}
}

// labelSuite's method is run through reflect, as a test framework's suites
// are: its package is the one found.
type labelSuite struct{ got string }

func (s *labelSuite) TestMethod(t *testing.T) { s.got = TestLabel(t) }

func TestLabelOfAMethodRunThroughReflect(t *testing.T) {
	clearRun(t)
	s := &labelSuite{}
	reflect.ValueOf(s).MethodByName("TestMethod").Call([]reflect.Value{reflect.ValueOf(t)})
	if want := thisPackage + "/" + t.Name(); s.got != want {
		t.Errorf("TestLabel %q, want %q", s.got, want)
	}
}
