package simtest

import (
	"bytes"
	"flag"
	"slices"
	"testing"
)

var flagRanges = flag.Int("simtest.ranges", 1, "TestBuggyProgramsFail: ranges of 200 seeds to search each buggy program's first failure in (the median is logged)")

func TestFixedProgramsPass(t *testing.T) {
	for _, p := range programs {
		t.Run(p.name, func(t *testing.T) { Run(t, p.cfg, p.fixed) })
	}
}

// TestBuggyProgramsFail: every buggy program fails within 200 seeds of
// each range; -v logs how many it took, -simtest.ranges=20 over 20 ranges.
func TestBuggyProgramsFail(t *testing.T) {
	for _, p := range programs {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			cfg, faults := p.cfg.resolved()
			var took []int
			for r := range *flagRanges {
				first := uint64(1 + 200*r)
				n := 0
				for seed := first; seed < first+200; seed++ {
					out, err := play(t, cfg, scenarioOf(faults, seed), seed, p.buggy, false, &bytes.Buffer{})
					if err != nil {
						t.Fatal(err)
					}
					if len(out.Failures) > 0 {
						n = int(seed-first) + 1
						break
					}
				}
				if n == 0 {
					t.Fatalf("no seed of %d to %d failed", first, first+199)
				}
				took = append(took, n)
			}
			slices.Sort(took)
			t.Logf("%s: seeds to the first failure over %d ranges: median %d (min %d, max %d)", p.name, len(took), took[len(took)/2], took[0], took[len(took)-1])
		})
	}
}
