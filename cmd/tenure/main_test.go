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
	code := m.Run()
	for _, f := range afterTests {
		f()
	}
	os.Exit(code)
}

// afterTests is what TestMain does once every test has run: remove the
// tenure binary the process tests built, for one.
var afterTests []func()
