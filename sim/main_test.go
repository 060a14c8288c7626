package sim

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestMain paces the collector as tenure sim does: runs keep little live
// heap, and at the default pace the collector runs all the time.
func TestMain(m *testing.M) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(2000)
		if os.Getenv("GOMEMLIMIT") == "" {
			debug.SetMemoryLimit(1 << 30)
		}
	}
	os.Exit(m.Run())
}
