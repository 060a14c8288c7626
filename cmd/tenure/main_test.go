package main

import (
	"os"
	"testing"
)

// TestMain lets the test binary serve as the supervisor of the commands
// that tests run in process (tenure starts itself for that).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == supervisorArg {
		os.Exit(supervisorMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}
