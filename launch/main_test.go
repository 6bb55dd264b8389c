package launch

import (
	"os"
	"testing"
)

// TestMain stops the one-node Slurm the Slurm tests may have started.
func TestMain(m *testing.M) {
	code := m.Run()
	stopSlurm()
	os.Exit(code)
}
