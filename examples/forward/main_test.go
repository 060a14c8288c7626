package main

import (
	"bytes"
	"strings"
	"testing"
)

// The example's run: every order is written by the leader of the moment,
// through a hand-over.
func TestForward(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "hands over") || strings.Count(out.String(), ": 200 ") != 12 {
		t.Fatalf("output:\n%s", out.String())
	}
}
