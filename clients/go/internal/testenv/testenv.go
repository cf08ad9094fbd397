// SPDX-License-Identifier: Apache-2.0

// Package testenv is what the tests of larder and lardertest share: a real
// server to test against, and the module's and repository's folders.
package testenv

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is one running `larder serve`.
type Server struct {
	URL    string
	cmd    *exec.Cmd
	dir    string
	stderr string
}

// ModuleDir is the folder of the client's go.mod, found from the working
// directory (a package's, under go test) up.
func ModuleDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testenv: no go.mod above the working directory")
		}
		dir = parent
	}
}

// RepoFile is the path of elem in the Larder repository, which holds the
// module in clients/go.
func RepoFile(t *testing.T, elem ...string) string {
	t.Helper()
	module, err := ModuleDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{module, "..", ".."}, elem...)...)
}

// FixturesDir is the fixtures folder the tests serve: LARDER_FIXTURES, else
// the repository's fixtures/.
func FixturesDir() (string, error) {
	if d := os.Getenv("LARDER_FIXTURES"); d != "" {
		return filepath.Abs(d)
	}
	module, err := ModuleDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(module, "..", "..", "fixtures"), nil
}

// StartServer starts binary with extra arguments on a free port, with a
// fresh root and FixturesDir, and waits for its "larder listening on URL"
// line.
func StartServer(binary string, extra ...string) (*Server, error) {
	return startServer(binary, nil, "root", extra)
}

// StartHiddenServer is StartServer through the repository's
// Tests/support/hidden-larder: the server runs in a mount namespace of its
// own with a tmpfs over its root's folder, so that this process cannot open
// any of its stores' files (a store's path does not exist here), as for a
// server on another machine; HTTP on the loopback address works as ever.
// The remote-mode tests use it.
func StartHiddenServer(binary string, extra ...string) (*Server, error) {
	wrapper, err := hiddenWrapper()
	if err != nil {
		return nil, err
	}
	return startServer(wrapper, []string{"LARDER_HIDDEN_BINARY=" + binary}, filepath.Join("hidden", "root"), extra)
}

// hiddenWrapper is the repository's Tests/support/hidden-larder.
func hiddenWrapper() (string, error) {
	module, err := ModuleDir()
	if err != nil {
		return "", err
	}
	wrapper := filepath.Join(module, "..", "..", "Tests", "support", "hidden-larder")
	if _, err := os.Stat(wrapper); err != nil {
		return "", fmt.Errorf("the remote-mode tests' server wrapper: %w", err)
	}
	return wrapper, nil
}

// HiddenLarder is the command that runs LARDER_BINARY as a hidden server
// (`larder serve` or `larder up`), for a test to run as its larder binary,
// with the variable it needs: Tests/support/hidden-larder and
// LARDER_HIDDEN_BINARY=... Skips the test as HiddenServer does.
func HiddenLarder(t *testing.T) (wrapper, env string) {
	t.Helper()
	binary := hiddenBinary(t)
	wrapper, err := hiddenWrapper()
	if err != nil {
		t.Fatal(err)
	}
	return wrapper, "LARDER_HIDDEN_BINARY=" + binary
}

// hiddenBinary is LARDER_BINARY, for a hidden server; skips the test
// without it or without unshare.
func hiddenBinary(t *testing.T) string {
	t.Helper()
	binary := os.Getenv("LARDER_BINARY")
	if binary == "" {
		t.Skip("the remote-mode tests start a hidden server of LARDER_BINARY, which is not set")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("the remote-mode tests' hidden server needs unshare (Linux): ", err)
	}
	return binary
}

// startServer starts `command serve` with extra arguments and env added to
// this process's environment, its root the folder root of a fresh temporary
// folder.
func startServer(command string, env []string, root string, extra []string) (*Server, error) {
	fixtures, err := FixturesDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "larder-go-test-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, stderr: filepath.Join(dir, "server.stderr")}
	errFile, err := os.Create(s.stderr)
	if err != nil {
		return nil, err
	}
	defer errFile.Close()
	args := append([]string{"serve", "--port", "0", "--root", filepath.Join(dir, root), "--fixtures", fixtures}, extra...)
	s.cmd = exec.Command(command, args...)
	if env != nil {
		s.cmd.Env = append(os.Environ(), env...)
	}
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
			s.Stop()
			return nil, fmt.Errorf("server printed %q, not %q...; stderr:\n%s", line, prefix, s.Log())
		}
		s.URL = strings.TrimPrefix(line, prefix)
		return s, nil
	case <-time.After(30 * time.Second):
		s.Stop()
		return nil, fmt.Errorf("server did not say it listens within 30 s; stderr:\n%s", s.Log())
	}
}

// Log is what the server wrote to standard error.
func (s *Server) Log() string {
	data, _ := os.ReadFile(s.stderr)
	return string(data)
}

// Stop sends SIGTERM, waits (killing it after 15 s) and removes its files.
func (s *Server) Stop() {
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

// Run is a TestMain's body: it starts the binary named by LARDER_BINARY
// (StartServer), points LARDER_URL at it, runs the tests and stops it (and
// the HiddenServer, if a test started one), answering the exit code.
// Without LARDER_BINARY, an already running server at LARDER_URL is used.
// LARDER_MODE is unset: the tests that want remote mode say so.
func Run(m *testing.M) int {
	os.Unsetenv("LARDER_MODE") // the remote-mode tests set their mode themselves
	binary := os.Getenv("LARDER_BINARY")
	if binary == "" && os.Getenv("LARDER_URL") == "" {
		fmt.Fprintln(os.Stderr, "larder tests: set LARDER_BINARY to the larder binary (or LARDER_URL to a running server); clients/go/test.sh BINARY does")
		return 2
	}
	var server *Server
	if binary != "" {
		var err error
		server, err = StartServer(binary)
		if err != nil {
			fmt.Fprintln(os.Stderr, "larder tests: starting the server:", err)
			return 1
		}
		os.Setenv("LARDER_URL", server.URL)
	}
	code := m.Run()
	hiddenMu.Lock()
	hidden := hiddenServer
	hiddenServer = nil
	hiddenMu.Unlock()
	for _, s := range []*Server{server, hidden} {
		if s == nil {
			continue
		}
		if code != 0 {
			log := s.Log()
			if len(log) > 8000 {
				log = "...\n" + log[len(log)-8000:]
			}
			which := binary
			if s == hidden {
				which += ", hidden"
			}
			fmt.Fprintf(os.Stderr, "--- server stderr (%s) ---\n%s", which, log)
		}
		s.Stop()
	}
	return code
}

// The hidden server of this test process (HiddenServer), started on first
// use and stopped by Run.
var (
	hiddenMu     sync.Mutex
	hiddenServer *Server
)

// HiddenServer is a server started with StartHiddenServer for this test
// process's remote-mode tests: one per process, started by the first test
// that asks, stopped when Run ends. Skips the test when LARDER_BINARY is not
// set (the tests then run against someone else's LARDER_URL) or there is no
// unshare (not Linux).
func HiddenServer(t *testing.T) *Server {
	t.Helper()
	binary := hiddenBinary(t)
	hiddenMu.Lock()
	defer hiddenMu.Unlock()
	if hiddenServer == nil {
		s, err := StartHiddenServer(binary)
		if err != nil {
			t.Fatalf("starting the hidden server (Tests/support/hidden-larder): %v", err)
		}
		hiddenServer = s
	}
	return hiddenServer
}

// Context is a context that ends with the test, at most a minute on.
func Context(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// BuildKey is a build key of the test's own: its name, key-safe, and the
// time.
func BuildKey(t *testing.T) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, t.Name())
	name = strings.Trim(name, ".")
	if len(name) > 80 {
		name = name[:80]
	}
	return fmt.Sprintf("%s-%d", name, time.Now().UnixNano())
}

// ReadZip opens the zip at path, checks that it holds a SQLite database
// named store.sqlite, and returns its manifest.json.
func ReadZip(t *testing.T, path string) map[string]any {
	t.Helper()
	z, err := zip.OpenReader(path)
	if err != nil {
		t.Fatalf("opening %s: %v", path, err)
	}
	defer z.Close()
	var manifest map[string]any
	found := false
	for _, f := range z.File {
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatalf("reading %s in %s: %v", f.Name, path, err)
		}
		switch f.Name {
		case "store.sqlite":
			found = true
			if !bytes.HasPrefix(data, []byte("SQLite format 3\x00")) {
				t.Errorf("store.sqlite in %s is not a SQLite database", path)
			}
		case "manifest.json":
			if err := json.Unmarshal(data, &manifest); err != nil {
				t.Errorf("manifest.json: %v", err)
			}
		}
	}
	if !found || manifest == nil {
		t.Fatalf("%s lacks store.sqlite or manifest.json", path)
	}
	return manifest
}

// Go runs the go tool with args in dir, offline, with the environment env
// (GOPROXY=off, GOFLAGS=-mod=mod and GOWORK=off added); answers its output
// and how it ended. Skips the test when there is no go tool on PATH.
func Go(t *testing.T, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, args...)
	cmd.Dir = dir
	cmd.Env = append(append([]string{}, env...), "GOPROXY=off", "GOFLAGS=-mod=mod", "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err = cmd.Run()
	return out.String(), err
}

// SharedDefaults are the values of clients/defaults.json, by name.
func SharedDefaults(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(RepoFile(t, "clients", "defaults.json"))
	if err != nil {
		t.Fatal(err)
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(data, &entries); err != nil {
		t.Fatalf("clients/defaults.json: %v", err)
	}
	table := map[string]any{}
	for name, raw := range entries {
		if name[0] == '_' {
			continue
		}
		var entry struct{ Value any }
		if err := json.Unmarshal(raw, &entry); err != nil {
			t.Fatalf("clients/defaults.json: %s: %v", name, err)
		}
		table[name] = entry.Value
	}
	return table
}

// CheckDefaults checks one package's constants against clients/defaults.json:
// each has its entry's value, and they with the entries the other package
// checks (elsewhere) are every entry.
func CheckDefaults(t *testing.T, constants map[string]any, elsewhere []string) {
	t.Helper()
	table := SharedDefaults(t)
	checked := append(sortedKeys(constants), elsewhere...)
	sort.Strings(checked)
	if want := sortedKeys(table); !reflect.DeepEqual(checked, want) {
		t.Fatalf("the constants checked (here and in the other package) are %v, clients/defaults.json has %v", checked, want)
	}
	for name, got := range constants {
		if want := table[name]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the client has %v, clients/defaults.json %v", name, got, want)
		}
	}
}

func sortedKeys(m map[string]any) []string {
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
