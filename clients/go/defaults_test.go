package larder

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"
)

// TestDefaultsAreTheSharedOnes checks the client's constants against
// clients/defaults.json, the defaults every client shares.
func TestDefaultsAreTheSharedOnes(t *testing.T) {
	ms := func(d time.Duration) any { return float64(d.Milliseconds()) }
	constants := map[string]any{
		"default_url":             DefaultURL,
		"request_timeout_ms":      ms(DefaultRequestTimeout),
		"wait_timeout_ms":         ms(serverWaitDefault),
		"build_timeout_ms":        ms(DefaultBuildTimeout),
		"build_poll_ms":           ms(buildPoll),
		"download_timeout_ms":     ms(DefaultDownloadTimeout),
		"finish_attempts":         float64(finishAttempts),
		"retry_after_default_ms":  ms(retryAfterDefault),
		"retry_after_max_ms":      ms(retryAfterMax),
		"artifacts_dir":           defaultArtifactsDir,
		"artifact_name_max_chars": float64(artifactNameMax),
		"run_variables":           pairs(runVariables),
		"label_max_bytes":         float64(labelMaxBytes),
	}
	data, err := os.ReadFile(filepath.Join("..", "defaults.json"))
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
	if names, want := keys(constants), keys(table); !reflect.DeepEqual(names, want) {
		t.Fatalf("the constants checked are %v, clients/defaults.json has %v", names, want)
	}
	for name, want := range table {
		if got := constants[name]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the client has %v, clients/defaults.json %v", name, got, want)
		}
	}
}

// pairs is vars as JSON decodes an array of pairs.
func pairs(vars [][2]string) []any {
	list := make([]any, len(vars))
	for i, v := range vars {
		list[i] = []any{v[0], v[1]}
	}
	return list
}

func keys(m map[string]any) []string {
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
