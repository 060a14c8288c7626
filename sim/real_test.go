package sim

import (
	"testing"
	"testing/synctest"
	"time"
)

// RunReal runs scenario sc with seed on the real tier: every instance is a
// tenure.Candidate with its goroutines and callbacks, given a clock, a store
// and a logger by the simulator. It must be called from a test, outside any
// synctest bubble: the run happens inside one, where synctest.Wait tells the
// scheduler that every goroutine has settled before it fires the next event.
// The scheduler never lets the runtime's timers decide anything: every
// clock the Candidates hold is the simulator's, and it fires one event at a
// time in (true time, sequence) order.
func RunReal(t *testing.T, sc *Scenario, seed uint64, opt Options) *Result {
	t.Helper()
	if opt.Strategy != Tenure {
		t.Fatalf("sim: the real tier runs tenure.Candidate; the %v strategy exists in the fast tier only", opt.Strategy)
	}
	start := time.Now()
	var r *Result
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(sc, seed, opt, newRealProcess)
		w.shared = true
		w.settle = w.settleReal
		before := bubble()
		w.run()
		synctest.Wait()
		for _, g := range bubble().since(before) {
			w.chk.violate(Goroutines, nil, "a goroutine outlives the run:\n"+g)
		}
		w.finish()
		r = w.result("real")
	})
	r.Wall = time.Since(start)
	return r
}

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
