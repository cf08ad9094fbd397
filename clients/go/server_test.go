package larder

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests run against a real server: TestMain starts the binary named by
// LARDER_BINARY on a free port with a fresh root and the repository's
// fixtures/ (LARDER_FIXTURES overrides), and points LARDER_URL at it. Without
// LARDER_BINARY, an already running server at LARDER_URL is used.

// testServer is one running `larder serve`.
type testServer struct {
	URL    string
	cmd    *exec.Cmd
	dir    string
	stderr string
}

// fixturesDir is the fixtures directory the tests serve.
func fixturesDir() (string, error) {
	if d := os.Getenv("LARDER_FIXTURES"); d != "" {
		return filepath.Abs(d)
	}
	return filepath.Abs(filepath.Join("..", "..", "fixtures"))
}

// startServer starts binary with extra arguments and waits for its
// "larder listening on URL" line.
func startServer(binary string, extra ...string) (*testServer, error) {
	fixtures, err := fixturesDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "larder-go-test-")
	if err != nil {
		return nil, err
	}
	s := &testServer{dir: dir, stderr: filepath.Join(dir, "server.stderr")}
	errFile, err := os.Create(s.stderr)
	if err != nil {
		return nil, err
	}
	defer errFile.Close()
	args := append([]string{"serve", "--port", "0", "--root", filepath.Join(dir, "root"), "--fixtures", fixtures}, extra...)
	s.cmd = exec.Command(binary, args...)
	s.cmd.Stderr = errFile
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	lines := make(chan string, 1)
	go func() {
		r := bufio.NewReader(out)
		line, _ := r.ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, r) // never let a full pipe stall the server
	}()
	select {
	case line := <-lines:
		const prefix = "larder listening on "
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, prefix) {
			s.stop()
			return nil, fmt.Errorf("server printed %q, not %q...; stderr:\n%s", line, prefix, s.log())
		}
		s.URL = strings.TrimPrefix(line, prefix)
		return s, nil
	case <-time.After(30 * time.Second):
		s.stop()
		return nil, fmt.Errorf("server did not say it listens within 30 s; stderr:\n%s", s.log())
	}
}

func (s *testServer) log() string {
	data, _ := os.ReadFile(s.stderr)
	return string(data)
}

// stop sends SIGTERM, waits (killing it after 15 s) and removes its files.
func (s *testServer) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	os.RemoveAll(s.dir)
}

var server *testServer

func TestMain(m *testing.M) {
	if os.Getenv(upChildEnv) != "" {
		// A child of TestBackToBackRunsWhileTheServerStops: its server is the one `larder up` gives.
		os.Exit(m.Run())
	}
	binary := os.Getenv("LARDER_BINARY")
	if binary == "" && os.Getenv("LARDER_URL") == "" {
		fmt.Fprintln(os.Stderr, "larder tests: set LARDER_BINARY to the larder binary (or LARDER_URL to a running server); clients/go/test.sh BINARY does")
		os.Exit(2)
	}
	if binary != "" {
		var err error
		server, err = startServer(binary)
		if err != nil {
			fmt.Fprintln(os.Stderr, "larder tests: starting the server:", err)
			os.Exit(1)
		}
		os.Setenv("LARDER_URL", server.URL)
	}
	code := m.Run()
	if server != nil {
		if code != 0 {
			log := server.log()
			if len(log) > 8000 {
				log = "...\n" + log[len(log)-8000:]
			}
			fmt.Fprintf(os.Stderr, "--- server stderr (%s) ---\n%s", binary, log)
		}
		server.stop()
	}
	os.Exit(code)
}

// testContext is a context that ends with the test, at most a minute on.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
