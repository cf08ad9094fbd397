package larder

import (
	"testing"
	"time"

	"github.com/larder-dev/larder/clients/go/internal/testenv"
)

// helperDefaults are the entries of clients/defaults.json that lardertest's
// TestDefaultsAreTheSharedOnes checks.
var helperDefaults = []string{"artifact_name_max_chars", "artifacts_dir", "label_max_bytes", "run_variables"}

// TestDefaultsAreTheSharedOnes checks the client's constants against
// clients/defaults.json, the defaults every client shares.
func TestDefaultsAreTheSharedOnes(t *testing.T) {
	ms := func(d time.Duration) any { return float64(d.Milliseconds()) }
	constants := map[string]any{
		"default_url":            DefaultURL,
		"request_timeout_ms":     ms(DefaultRequestTimeout),
		"wait_timeout_ms":        ms(serverWaitDefault),
		"build_timeout_ms":       ms(DefaultBuildTimeout),
		"build_poll_ms":          ms(buildPoll),
		"download_timeout_ms":    ms(DefaultDownloadTimeout),
		"finish_attempts":        float64(finishAttempts),
		"retry_after_default_ms": ms(retryAfterDefault),
		"retry_after_max_ms":     ms(retryAfterMax),
	}
	testenv.CheckDefaults(t, constants, helperDefaults)
}
