package lardertest

import (
	"testing"

	"github.com/larder-dev/larder/clients/go/internal/testenv"
)

// coreDefaults are the entries of clients/defaults.json that larder's
// TestDefaultsAreTheSharedOnes checks.
var coreDefaults = []string{
	"build_poll_ms", "build_timeout_ms", "default_url", "download_timeout_ms", "finish_attempts",
	"request_timeout_ms", "retry_after_default_ms", "retry_after_max_ms", "wait_timeout_ms",
}

// TestDefaultsAreTheSharedOnes checks the test helpers' constants against
// clients/defaults.json, the defaults every client shares.
func TestDefaultsAreTheSharedOnes(t *testing.T) {
	constants := map[string]any{
		"artifacts_dir":           defaultArtifactsDir,
		"artifact_name_max_chars": float64(artifactNameMax),
		"run_variables":           pairs(runVariables),
		"label_max_bytes":         float64(labelMaxBytes),
	}
	testenv.CheckDefaults(t, constants, coreDefaults)
}

// pairs is vars as JSON decodes an array of pairs.
func pairs(vars [][2]string) []any {
	list := make([]any, len(vars))
	for i, v := range vars {
		list[i] = []any{v[0], v[1]}
	}
	return list
}
