package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// commas writes n with thousands separated by commas, as the docs do.
func commas(n uint64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestDocsCountTheSimulator: the counts a reader can check against the
// code, the scenarios and the seeds of the full pass, are the code's in
// the README, scripts/test.sh (make test) and docs/sim.md.
func TestDocsCountTheSimulator(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("seedsFor counts the full pass, without -race or -short")
	}
	var seeds uint64
	for _, sc := range Scenarios() {
		seeds += seedsFor(sc)
	}
	n := len(Scenarios())
	for file, wants := range map[string][]string{
		"README.md":       {fmt.Sprintf("All %d scenarios", n), commas(seeds) + " seeds"},
		"scripts/test.sh": {"its full " + commas(seeds) + " seeds"},
		"docs/sim.md":     {commas(seeds) + " seeds, one in ten twice", fmt.Sprintf("each of the %d scenarios", n), "(" + commas(seeds) + " seeds)"},
	} {
		b, err := os.ReadFile(filepath.Join("..", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wants {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s does not say %q: the code has %d scenarios and %s seeds in its full pass", file, w, n, commas(seeds))
			}
		}
	}
}
