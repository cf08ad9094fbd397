// bench/remote's Go driver: ITERATIONS tests of one SCENARIO against the
// server at URL with clients/go (larder.New(url, ""), its mode from
// LARDER_MODE), after WARMUP tests not counted; prints one JSON object.
//
//	driver SCENARIO URL ITERATIONS WARMUP TEMPLATE FIXTURES ARTIFACTS
//
// As driver.py, with the row written by the sqlite3 command-line tool (the
// Go client has no SQLite of its own), whose process start is most of
// "write"; a failure is ended as lardertest.StoreForTest ends one.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/larder-dev/larder/clients/go/larder"
)

const row = "INSERT INTO albums (title) VALUES ('Summer')"

type output struct {
	Client     string               `json:"client"`
	Scenario   string               `json:"scenario"`
	Mode       string               `json:"mode"`
	Writer     string               `json:"writer"`
	Iterations []map[string]float64 `json:"iterations"`
	Facts      []map[string]any     `json:"facts"`
}

func write(path string) error {
	cmd := exec.Command("sqlite3", path, row)
	cmd.Stderr = os.Stderr
	return cmd.Run()
}

func one(ctx context.Context, client *larder.Client, scenario, template string, fixtures []string, artifacts string, n int) (map[string]float64, map[string]any, error) {
	remote, failing := strings.HasPrefix(scenario, "remote"), strings.HasSuffix(scenario, "fail")
	steps, facts := map[string]float64{}, map[string]any{}
	began := time.Now()
	last := began
	step := func(name string) {
		now := time.Now()
		steps[name] = float64(now.Sub(last).Nanoseconds()) / 1e6
		last = now
	}

	store, err := client.CreateStore(ctx, larder.StoreOptions{Template: template, Fixtures: fixtures})
	if err != nil {
		return nil, nil, err
	}
	step("create")
	path := store.Path
	if err := write(path); err != nil {
		return nil, nil, fmt.Errorf("sqlite3 %s: %w", path, err)
	}
	step("write")
	if store.Remote() != remote || (path == store.Info.Path) == remote {
		return nil, nil, fmt.Errorf("%s: the store is remote=%v, path %s, the server's %s", scenario, store.Remote(), path, store.Info.Path)
	}
	if !failing {
		if err := store.Delete(ctx); err != nil {
			return nil, nil, err
		}
		step("delete")
		steps["total"] = float64(last.Sub(began).Nanoseconds()) / 1e6
		return steps, facts, nil
	}
	if remote {
		if err := store.CheckIn(ctx); err != nil {
			return nil, nil, err
		}
		step("checkin")
	}
	if err := store.Keep(ctx); err != nil {
		return nil, nil, err
	}
	step("keep")
	artifact := filepath.Join(artifacts, fmt.Sprintf("go-%s-%d-%s.zip", scenario, n, store.ID))
	if err := store.Artifact(ctx, artifact); err != nil {
		return nil, nil, err
	}
	step("artifact")
	if err := store.Close(); err != nil {
		return nil, nil, err
	}
	step("close")
	steps["total"] = float64(last.Sub(began).Nanoseconds()) / 1e6
	facts["albums"] = store.Info.Counts["albums"]
	facts["size_bytes"] = store.Info.SizeBytes
	if info, err := os.Stat(artifact); err == nil {
		facts["artifact_bytes"] = info.Size()
	}
	os.Remove(artifact)
	last = time.Now()
	if err := store.Delete(ctx); err != nil {
		return nil, nil, err
	}
	step("delete")
	return steps, facts, nil
}

func main() {
	if len(os.Args) != 8 {
		fmt.Fprintln(os.Stderr, "usage: driver SCENARIO URL ITERATIONS WARMUP TEMPLATE FIXTURES ARTIFACTS")
		os.Exit(2)
	}
	scenario, url, template, artifacts := os.Args[1], os.Args[2], os.Args[5], os.Args[7]
	iterations, _ := strconv.Atoi(os.Args[3])
	warmup, _ := strconv.Atoi(os.Args[4])
	var fixtures []string
	if os.Args[6] != "-" {
		fixtures = strings.Split(os.Args[6], ",")
	}
	client := larder.New(url, "")
	mode, err := client.ResolveMode()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	version, _ := exec.Command("sqlite3", "--version").Output()
	out := output{Client: "go", Scenario: scenario, Mode: string(mode),
		Writer:     fmt.Sprintf("sqlite3 %s (a process per write)", strings.Fields(string(version) + " ?")[0]),
		Iterations: []map[string]float64{}, Facts: []map[string]any{}}
	ctx := context.Background()
	for n := 0; n < warmup+iterations; n++ {
		steps, facts, err := one(ctx, client, scenario, template, fixtures, artifacts, n)
		if err != nil {
			fmt.Fprintf(os.Stderr, "driver (go): %s test %d: %v\n", scenario, n, err)
			os.Exit(1)
		}
		if n >= warmup {
			out.Iterations = append(out.Iterations, steps)
			out.Facts = append(out.Facts, facts)
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(1)
	}
}
