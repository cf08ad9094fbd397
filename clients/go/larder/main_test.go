package larder

import (
	"os"
	"testing"

	"github.com/larder-dev/larder/clients/go/internal/testenv"
)

// The tests run against a real server that TestMain starts (testenv.Run).
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m))
}
