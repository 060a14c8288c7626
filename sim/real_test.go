package sim

import (
	"testing"
	"testing/synctest"
)

// realSeeds: the real tier runs every scenario over this many seeds.
func realSeeds() uint64 {
	if raceEnabled || testing.Short() {
		return 1
	}
	return 3
}

// TestRealTier runs the real tenure.Candidate, tenure.Locker and
// tenure.Group through every scenario. Every promised invariant must hold,
// I6 included, and the trace must equal the fast tier's: the fast tier is
// then a faithful model of their goroutines, and its millions of events
// speak for the real code.
func TestRealTier(t *testing.T) {
	for _, sc := range Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			for seed := uint64(1); seed <= realSeeds(); seed++ {
				real := RunReal(t, sc, seed, Options{})
				if real.Failed() {
					t.Errorf("%v\n  replay the fast tier: %s", real, replayCmd(sc.Name, seed, Options{}))
					continue
				}
				if fast := Run(sc, seed, Options{}); fast.Hash != real.Hash || fast.Counts != real.Counts {
					t.Errorf("seed %d: the tiers disagree: real trace %016x (%d lines, %v), fast %016x (%d lines, %v)",
						seed, real.Hash, real.Lines, real.Counts, fast.Hash, fast.Lines, fast.Counts)
				}
			}
		})
	}
}

// TestRealTierDeterministic: the real tier replays too, goroutines and all.
func TestRealTierDeterministic(t *testing.T) {
	for _, name := range []string{"swarm", "slow-callbacks", "stop-during-renewal", "lock-sem-resize", "group-faults"} {
		a := RunReal(t, Lookup(name), 2, Options{})
		b := RunReal(t, Lookup(name), 2, Options{})
		if a.Hash != b.Hash || a.Lines != b.Lines {
			t.Errorf("%s: two real runs differ: %016x (%d lines), %016x (%d lines)", name, a.Hash, a.Lines, b.Hash, b.Lines)
		}
	}
}

// TestRealTierUnfenced: the zombie's stale write reaches an unfenced
// resource in the real tier too.
func TestRealTierUnfenced(t *testing.T) {
	r := RunReal(t, Lookup("gc-pause"), 1, Options{Resource: Unfenced})
	if r.Counts[Fencing] == 0 {
		t.Fatalf("no stale write accepted: %v", r)
	}
}

// TestBubbleCountsLeaks: the I6 check sees a goroutine left blocked.
func TestBubbleCountsLeaks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		before := bubble()
		block := make(chan struct{})
		go func() { <-block }()
		synctest.Wait()
		leaks := bubble().since(before)
		close(block)
		if len(leaks) != 1 {
			t.Fatalf("%d leaks, want 1: %q", len(leaks), leaks)
		}
	})
}
