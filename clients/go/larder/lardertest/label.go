// SPDX-License-Identifier: Apache-2.0

package lardertest

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// How the test helpers label the stores they make for a test, as every
// Larder client's helpers do (clients/README.md, "How a test helper labels
// its stores"): RUN/PACKAGE/TEST, so that one CI run's stores can be removed
// at once (DELETE /stores?label_prefix=RUN/) and tests of one name in two
// packages are told apart.

// runVariables are where the run prefix comes from when TestServer.Run is
// empty (clients/defaults.json's run_variables): the first pair whose
// variables are both set and non-empty gives the value of its first; an
// empty second name is no condition.
var runVariables = [][2]string{
	{"LARDER_RUN", ""},
	{"GITHUB_RUN_ID", "GITHUB_ACTIONS"},
	{"CI_PIPELINE_ID", "GITLAB_CI"},
	{"BUILDKITE_BUILD_ID", "BUILDKITE"},
	{"BUILD_TAG", "JENKINS_URL"},
	{"CIRCLE_WORKFLOW_ID", "CIRCLECI"},
}

// labelMaxBytes is the longest label the server takes; a longer helper's
// label is cut to it at a UTF-8 character boundary.
const labelMaxBytes = 256

// TestLabel is the label StoreForTest and CheckSnapshots give the stores
// they make for t: RUN/PACKAGE/TEST, at most 256 bytes (cut at a UTF-8
// character boundary, keeping its start).
//
//   - RUN is TestServer.Run, else the value of the first of LARDER_RUN,
//     GITHUB_RUN_ID (when GITHUB_ACTIONS is set too), CI_PIPELINE_ID
//     (GITLAB_CI), BUILDKITE_BUILD_ID (BUILDKITE), BUILD_TAG (JENKINS_URL)
//     and CIRCLE_WORKFLOW_ID (CIRCLECI) that is set, else none: the label is
//     then PACKAGE/TEST.
//   - PACKAGE is the import path of the test's package (e.g.
//     github.com/acme/shop/orders), found from the call stack: the package
//     of the function the testing package ran (the test function, or a
//     subtest's or benchmark's function; a function called through reflect,
//     such as a suite's method, counts as run), else of the outermost
//     function of the goroutine. An external test package (orders_test)
//     counts as the package it tests (orders), as `go test` names it.
//   - TEST is t.Name(), subtests included (TestCheckout/empty_cart).
//
// Call it from the test's own goroutine (or one it started), as the
// helpers are called; use it to build a label of your own on the helpers'.
func TestLabel(t testing.TB) string {
	return testLabel(testPackage(), t.Name())
}

// testLabel is RUN/pkg/test (pkg/test without a run prefix, an empty pkg
// left out), cut to labelMaxBytes.
func testLabel(pkg, test string) string {
	parts := make([]string, 0, 3)
	if run := runPrefix(); run != "" {
		parts = append(parts, run)
	}
	if pkg != "" {
		parts = append(parts, pkg)
	}
	parts = append(parts, test)
	return cutLabel(strings.Join(parts, "/"), labelMaxBytes)
}

// runPrefix is the run prefix of the helpers' labels: TestServer.Run, else
// the first of runVariables that is set; "" when none.
func runPrefix() string {
	if TestServer.Run != "" {
		return TestServer.Run
	}
	for _, v := range runVariables {
		value := os.Getenv(v[0])
		if value == "" || (v[1] != "" && os.Getenv(v[1]) == "") {
			continue
		}
		return value
	}
	return ""
}

// cutLabel is label cut to at most max bytes, at a UTF-8 character
// boundary, keeping its start.
func cutLabel(label string, max int) string {
	if len(label) <= max {
		return label
	}
	end := max
	for end > 0 && !utf8.RuneStart(label[end]) {
		end--
	}
	return label[:end]
}

// testPackage is the import path of the package of the test that called
// the helper calling it (see TestLabel); "" when the stack names none.
func testPackage() string {
	pcs := make([]uintptr, 64)
	var n int
	for {
		n = runtime.Callers(2, pcs)
		if n < len(pcs) {
			break
		}
		pcs = make([]uintptr, 2*len(pcs))
	}
	frames := runtime.CallersFrames(pcs[:n])
	var names []string
	for {
		f, more := frames.Next()
		names = append(names, f.Function)
		if !more {
			break
		}
	}
	// The innermost function that the testing package (or reflect, on the
	// behalf of a test framework or a fuzz test) called.
	for i := 0; i+1 < len(names); i++ {
		caller := funcPackage(names[i+1])
		if caller == "testing" || caller == "reflect" {
			if pkg := funcPackage(names[i]); !runtimePackage(pkg) {
				return testPackageOf(pkg)
			}
		}
	}
	// A goroutine the test started: its outermost function of its own.
	for i := len(names) - 1; i >= 0; i-- {
		if pkg := funcPackage(names[i]); pkg != "" && !runtimePackage(pkg) {
			return testPackageOf(pkg)
		}
	}
	return ""
}

// runtimePackage is whether pkg is one of the packages that run tests
// rather than hold them.
func runtimePackage(pkg string) bool {
	switch pkg {
	case "", "runtime", "testing", "reflect":
		return true
	}
	return false
}

// testPackageOf is pkg without the _test of an external test package.
func testPackageOf(pkg string) string {
	return strings.TrimSuffix(pkg, "_test")
}

// funcPackage is the import path of the package of the function named
// name as runtime.Frame.Function names it: "example.com/a/b%2ev2.TestX.func1"
// is in "example.com/a/b.v2" (the linker escapes the dots, and a few other
// characters, of the path's last element as %XX).
func funcPackage(name string) string {
	slash := strings.LastIndexByte(name, '/')
	dot := strings.IndexByte(name[slash+1:], '.')
	if dot < 0 {
		return ""
	}
	return unescapePath(name[:slash+1+dot])
}

// unescapePath undoes the linker's %XX escapes of a package path.
func unescapePath(path string) string {
	if !strings.Contains(path, "%") {
		return path
	}
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		if path[i] == '%' && i+2 < len(path) {
			if c, err := strconv.ParseUint(path[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(c))
				i += 2
				continue
			}
		}
		b.WriteByte(path[i])
	}
	return b.String()
}
