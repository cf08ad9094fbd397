package lardertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/larder-dev/larder/clients/go/larder"
)

// A `larder up` that fails is run again, and its failure is not kept for
// the process (issue 43: a `larder up` that joined a server as it stopped
// failed, and every later test of that process failed with it).

// scriptedUp is a `larder` that logs each run's arguments to $0.ran and
// fails its first $FAILS runs (saying which on stderr), then prints $ANSWER
// and exits 0.
const scriptedUp = `#!/bin/sh
echo "$*" >> "$0.ran"
runs=$(wc -l < "$0.ran")
if [ "$runs" -le "${FAILS:-0}" ]; then
    echo "scripted larder: failure $runs" >&2
    exit 2
fi
echo "$ANSWER"
`

// useScriptedUp makes TestClient run an executable file of text (a
// scriptedUp, with FAILS and ANSWER as given) from a clean slate: no URL
// given, none kept. It answers the file's path and the pauses TestClient
// takes between runs, recorded instead of taken.
func useScriptedUp(t *testing.T, text string, fails int, answer string) (string, *[]time.Duration) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "larder")
	if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LARDER_URL", "")
	t.Setenv("FAILS", strconv.Itoa(fails))
	t.Setenv("ANSWER", answer)
	saved, savedPause := TestServer, upPause
	TestServer = TestServerOptions{Binary: path}
	upURL = ""
	pauses := &[]time.Duration{}
	upPause = func(d time.Duration) { *pauses = append(*pauses, d) }
	t.Cleanup(func() { TestServer, upPause, upURL = saved, savedPause, "" })
	return path, pauses
}

// upRuns is how many times the scripted larder at path ran.
func upRuns(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path + ".ran")
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "\n")
}

func TestAFailedLarderUpIsRunAgainAndItsURLKept(t *testing.T) {
	path, pauses := useScriptedUp(t, scriptedUp, 1, "http://127.0.0.1:9")
	client, err := TestClient()
	if err != nil {
		t.Fatal(err)
	}
	if client.URL != "http://127.0.0.1:9" || upRuns(t, path) != 2 || fmt.Sprint(*pauses) != "[200ms]" {
		t.Errorf("URL %s after %d runs and pauses %v, want http://127.0.0.1:9 after 2 runs and [200ms]", client.URL, upRuns(t, path), *pauses)
	}
	// Once it answered, its URL is this process's: not run again.
	if client, err = TestClient(); err != nil || client.URL != "http://127.0.0.1:9" || upRuns(t, path) != 2 {
		t.Errorf("again: %v, %v after %d runs; want the URL kept", client, err, upRuns(t, path))
	}
}

func TestAFailedLarderUpIsTriedThreeTimesAndNotKept(t *testing.T) {
	path, pauses := useScriptedUp(t, scriptedUp, 1000, "http://127.0.0.1:9")
	for call := 1; call <= 2; call++ {
		_, err := TestClient()
		// What the last run said, as before (`--for` the go command too, under go test).
		start := fmt.Sprintf("larder: starting a server with `%s up --for %d", path, os.Getpid())
		end := fmt.Sprintf("` failed (exit status 2):\nscripted larder: failure %d", 3*call)
		if err == nil || !strings.HasPrefix(err.Error(), start) || !strings.HasSuffix(err.Error(), end) {
			t.Errorf("call %d: %v, want %q...%q", call, err, start, end)
		}
		if runs := upRuns(t, path); runs != 3*call {
			t.Errorf("call %d: %d runs in all, want %d", call, runs, 3*call)
		}
	}
	if fmt.Sprint(*pauses) != "[200ms 500ms 200ms 500ms]" {
		t.Errorf("pauses %v, want 200ms and 500ms for each call", *pauses)
	}
}

func TestWhatIsNotAFailedRunIsNotRunAgain(t *testing.T) {
	// Exit 0 without a URL: an answer, not a run that could not start a server this time.
	path, pauses := useScriptedUp(t, scriptedUp, 0, "ready")
	if _, err := TestClient(); err == nil || !strings.Contains(err.Error(), `printed "ready\n", not a server's URL`) {
		t.Errorf("%v, want the answer that is not a URL", err)
	}
	if runs := upRuns(t, path); runs != 1 || len(*pauses) != 0 {
		t.Errorf("%d runs, pauses %v; want one run", runs, *pauses)
	}
	// A file that cannot be run at all.
	path, pauses = useScriptedUp(t, "\x7fELF garbage\n", 0, "")
	if _, err := TestClient(); err == nil || !strings.Contains(err.Error(), "exec format error") {
		t.Errorf("%v, want it not to run", err)
	}
	if len(*pauses) != 0 {
		t.Errorf("pauses %v: a binary that cannot run was tried again", *pauses)
	}
	// No binary at all: the one sentence, at once.
	useScriptedUp(t, scriptedUp, 0, "")
	TestServer.Binary = ""
	t.Setenv("LARDER_BINARY", "")
	t.Setenv("PATH", pathWithoutLarder(os.Getenv("PATH")))
	if _, err := TestClient(); !errors.Is(err, ErrNoServer) {
		t.Errorf("%v, want ErrNoServer", err)
	}
}

// upChildEnv marks a run of this test binary as a child of
// TestBackToBackRunsWhileTheServerStops: it runs TestUpChild only, and
// TestMain starts no server for it.
const upChildEnv = "LARDER_TEST_UP_CHILD"

// TestUpChild, in a child process, gets the helpers' client as a test does
// (`larder up`, no URL given), makes a store and prints its server's URL.
func TestUpChild(t *testing.T) {
	if os.Getenv(upChildEnv) == "" {
		t.Skip("a child process of TestBackToBackRunsWhileTheServerStops")
	}
	client, err := TestClient()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := client.CreateStore(ctx, larder.StoreOptions{Label: "up-child"})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(map[string]string{"url": client.URL, "store": store.ID})
	fmt.Printf("child: %s\n", data)
}

// roundGaps is how long each round of TestBackToBackRunsWhileTheServerStops
// waits after the last one's processes ended: across the moment the server
// they leave stops (a second after them), so that some rounds' `larder up`
// joins it as it stops.
var roundGaps = []time.Duration{0, 850, 950, 1000, 1050, 1100, 1150, 1250, 0}

// TestBackToBackRunsWhileTheServerStops runs rounds of two processes at once
// (this test binary, running TestUpChild), each round right after the last
// one's processes ended, with a TMPDIR of their own: every process gets its
// store, whether it joins the server running, one stopping, or none.
func TestBackToBackRunsWhileTheServerStops(t *testing.T) {
	binary := os.Getenv("LARDER_BINARY")
	if binary == "" {
		t.Skip("LARDER_BINARY is not set")
	}
	tmp := t.TempDir()
	env := append(sampleEnv(), "LARDER_BINARY="+binary, "TMPDIR="+tmp, upChildEnv+"=1")
	servers := map[string]bool{}
	ended := time.Now()
	for round, gap := range roundGaps {
		time.Sleep(time.Until(ended.Add(gap * time.Millisecond)))
		var children []*exec.Cmd
		var outputs []*strings.Builder
		for i := 0; i < 2; i++ {
			cmd := exec.Command(os.Args[0], "-test.run=^TestUpChild$", "-test.count=1", "-test.v")
			cmd.Env = env
			out := &strings.Builder{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			children = append(children, cmd)
			outputs = append(outputs, out)
		}
		for i, cmd := range children {
			done := make(chan error, 1)
			go func(cmd *exec.Cmd) { done <- cmd.Wait() }(cmd)
			select {
			case err := <-done:
				if err != nil || !strings.Contains(outputs[i].String(), "--- PASS: TestUpChild") {
					t.Fatalf("round %d, child %d: %v\n%s", round, i, err, outputs[i])
				}
			case <-time.After(time.Minute):
				_ = cmd.Process.Kill()
				t.Fatalf("round %d, child %d did not end within a minute:\n%s", round, i, outputs[i])
			}
			for _, line := range strings.Split(outputs[i].String(), "\n") {
				var child struct{ URL string }
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "child: ")), &child) == nil && child.URL != "" {
					servers[child.URL] = true
				}
			}
		}
		ended = time.Now()
	}
	// The last server stops too, its folder removed.
	shared := filepath.Join(tmp, "larder-"+strconv.Itoa(os.Getuid()))
	for url := range servers {
		for left := leftOf(url, shared); len(left) > 0; left = leftOf(url, shared) {
			if time.Since(ended) > 5*time.Second {
				t.Fatalf("5 s after the last round: %s", strings.Join(left, "; "))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Logf("%d rounds of two processes back to back: %d servers", len(roundGaps), len(servers))
}
