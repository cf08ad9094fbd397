// SPDX-License-Identifier: Apache-2.0

package lardertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/larder-dev/larder/clients/go/larder"
)

// Where the test helpers (StoreForTest, CheckSnapshots, TestClient) get their
// server, as every Larder client's helpers do (clients/README.md): a URL when
// one is given, else a server that `larder up` starts for this run.

// TestServerOptions say where the test helpers get their server, and how
// they label the stores they make.
type TestServerOptions struct {
	// URL is a running server to use; when empty, LARDER_URL. When both are
	// empty, the helpers start a server with Binary.
	URL string
	// Binary is the larder executable that starts the server (`larder up`);
	// when empty, LARDER_BINARY, else larder on PATH.
	Binary string
	// Fixtures is the fixtures folder of a server the helpers start (`larder
	// up --fixtures`); when empty, LARDER_FIXTURES, else the first of
	// fixtures, tests/fixtures, test/fixtures and testdata/fixtures from the
	// working directory up to the module's top.
	Fixtures string
	// Run is the run prefix of the labels the helpers give their stores
	// (RUN/PACKAGE/TEST, see TestLabel); when empty, LARDER_RUN, else the
	// CI system's run id (GITHUB_RUN_ID, CI_PIPELINE_ID, BUILDKITE_BUILD_ID,
	// BUILD_TAG, CIRCLE_WORKFLOW_ID, each only on its own CI system), else
	// none.
	Run string
	// Mode is the mode of the helpers' client (larder.Client.Mode):
	// larder.ModeRemote gives each test a local copy of its store, for tests
	// that cannot open the server's files. When empty, LARDER_MODE, else
	// remote for a URL whose host is not a loopback address and local for
	// one that is (a server the helpers start is local).
	Mode larder.Mode
}

// TestServer is where StoreForTest, CheckSnapshots and TestClient get their
// server. Set its fields, if at all, before the first test that uses one
// (in TestMain, say); they are read without locking.
var TestServer TestServerOptions

// noServer is the one sentence the helpers fail with when there is neither a
// URL nor a binary: the same in every Larder client.
const noServer = "Larder: no server to use: set LARDER_URL to a running server's URL, or install the larder binary (set LARDER_BINARY to it, or put it on PATH)"

// ErrNoServer is TestClient's error when no URL is given and there is no
// larder binary to start a server with.
var ErrNoServer = errors.New(noServer)

// The server `larder up` started for this process: its URL is kept once it
// answers; a failure is not, so the next test runs `larder up` again.
var (
	upMu  sync.Mutex
	upURL string
)

// upRetryDelays are the pauses before running a `larder up` that exited
// non-zero again, within one call: one that joins a server as it stops can
// fail, and a moment later it starts a new one (issue 43).
var upRetryDelays = []time.Duration{200 * time.Millisecond, 500 * time.Millisecond}

// upPause takes those pauses; the tests count them instead.
var upPause = time.Sleep

// TestClient returns a client of the server the test helpers use, with the
// token LARDER_TOKEN:
//
//  1. TestServer.URL, else LARDER_URL, when one is set: nothing is started;
//  2. else the server that `BINARY up --for PID` prints, run once per process
//     in the working directory with the process's environment. BINARY is
//     TestServer.Binary, else LARDER_BINARY, else larder on PATH; PID is this
//     process, and also its parent when that is the go command, so that the
//     packages of one `go test ./...` share one server. The server is shared
//     by every process of the run (same binary, fixtures folder and
//     settings) and stops, removing its temporary folder, a second after the
//     last of them ends.
//
// With neither a URL nor a binary the error is ErrNoServer; a `larder up`
// that fails gives an error with what it wrote to standard error. One that
// exits non-zero is run again, up to three runs 0.2 s and 0.5 s apart, and
// a failure is not kept: the next call runs `larder up` anew.
//
// Use it where there is no *testing.T, e.g. to Build a template in TestMain;
// StoreForTest and CheckSnapshots use it.
//
// The client's Mode is TestServer.Mode; a LARDER_MODE that is neither
// "remote" nor "local" is an error, before any server is started.
func TestClient() (*larder.Client, error) {
	settleAhead()
	return testClient()
}

// testClient is TestClient without waiting for the work under way (Main).
func testClient() (*larder.Client, error) {
	if url := testURL(); url != "" {
		return withMode(larder.New(url, ""))
	}
	probe := &larder.Client{URL: "http://127.0.0.1", Mode: TestServer.Mode}
	if _, err := probe.ResolveMode(); err != nil {
		return nil, err
	}
	upMu.Lock()
	defer upMu.Unlock()
	if upURL == "" {
		url, err := larderUp()
		if err != nil {
			return nil, err
		}
		upURL = url
	}
	return withMode(larder.New(upURL, ""))
}

// withMode is c with TestServer.Mode, once its mode resolves.
func withMode(c *larder.Client) (*larder.Client, error) {
	c.Mode = TestServer.Mode
	if _, err := c.ResolveMode(); err != nil {
		return nil, err
	}
	return c, nil
}

// testURL is the URL given to the test helpers, if any.
func testURL() string {
	if TestServer.URL != "" {
		return TestServer.URL
	}
	return os.Getenv("LARDER_URL")
}

// testBinary is the larder executable the helpers start a server with; ""
// when there is none.
func testBinary() string {
	if TestServer.Binary != "" {
		return TestServer.Binary
	}
	if b := os.Getenv("LARDER_BINARY"); b != "" {
		return b
	}
	if b, err := exec.LookPath("larder"); err == nil {
		return b
	}
	return ""
}

// larderUp runs `BINARY up` for this process (and the go command running
// it) and answers the URL it prints; one that exits non-zero is run again
// after each of upRetryDelays, and the error is its last run's.
func larderUp() (string, error) {
	binary := testBinary()
	if binary == "" {
		return "", ErrNoServer
	}
	args := []string{"up", "--for", strconv.Itoa(os.Getpid())}
	if ppid := os.Getppid(); ppid > 1 && isGoCommand(ppid) {
		args = append(args, "--for", strconv.Itoa(ppid))
	}
	if TestServer.Fixtures != "" {
		args = append(args, "--fixtures", TestServer.Fixtures)
	}
	for attempt := 0; ; attempt++ {
		url, err := runUp(binary, args)
		var exit *exec.ExitError
		// Only an exit status says it could not start a server this time: not
		// a binary that cannot run, nor one killed when its time ran out.
		if err == nil || !errors.As(err, &exit) || exit.ExitCode() <= 0 || attempt >= len(upRetryDelays) {
			return url, err
		}
		upPause(upRetryDelays[attempt])
	}
}

// runUp runs `binary up` with args once and answers the URL it prints; the
// error wraps the *exec.ExitError of a run that exited non-zero.
func runUp(binary string, args []string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	command := binary + " " + strings.Join(args, " ")
	if err := cmd.Run(); err != nil {
		reason := strings.TrimSpace(stderr.String())
		if reason == "" {
			reason = "(nothing on standard error)"
		}
		return "", fmt.Errorf("larder: starting a server with `%s` failed (%w):\n%s", command, err, reason)
	}
	url := strings.TrimSpace(stdout.String())
	if i := strings.LastIndexByte(url, '\n'); i >= 0 {
		url = strings.TrimSpace(url[i+1:])
	}
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return "", fmt.Errorf("larder: `%s` printed %q, not a server's URL; standard error:\n%s", command, stdout.String(), strings.TrimSpace(stderr.String()))
	}
	return url, nil
}

// isGoCommand reports whether the process pid is the go command (`go test`
// runs each package's test binary as its child): its name in /proc, or,
// where there is no /proc (macOS, the BSDs), as ps tells it.
func isGoCommand(pid int) bool {
	p := strconv.Itoa(pid)
	if comm, err := os.ReadFile(filepath.Join("/proc", p, "comm")); err == nil {
		return strings.TrimSpace(string(comm)) == "go"
	}
	out, err := exec.Command("ps", "-o", "comm=", "-p", p).Output()
	if err != nil {
		return false
	}
	return filepath.Base(strings.TrimSpace(string(out))) == "go"
}
