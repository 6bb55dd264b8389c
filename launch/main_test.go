package launch

import (
	"os"
	"testing"

	"github.com/gofi-dev/fi/internal/jobtest"
)

// TestMain stops the one-node Slurm the Slurm tests may have started.
func TestMain(m *testing.M) {
	code := m.Run()
	jobtest.StopSlurm()
	os.Exit(code)
}
