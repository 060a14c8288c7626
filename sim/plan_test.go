package sim

import (
	"testing"
	"time"

	"github.com/tenure-go/tenure/election"
	budget "github.com/tenure-go/tenure/internal/plan"
)

// TestPlanBoundsMeasuredFailover: the failover bounds `tenure plan` prints
// (internal/plan) hold over the failovers the simulator measures at the
// same settings (the default timings, the healthy store's longest round
// trip), and are not loose by more than a poll and the round trips.
func TestPlanBoundsMeasuredFailover(t *testing.T) {
	seeds := uint64(200)
	if testing.Short() || raceEnabled {
		seeds = 20
	}
	p, err := budget.New(election.Timing{}, 5, 2*healthyLatency.Bound())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		scenario string
		bound    time.Duration
	}{
		{"leader-crash", p.CrashFailover},
		{"graceful-release", p.ReleaseFailover},
	} {
		var worst time.Duration
		for seed := uint64(1); seed <= seeds; seed++ {
			r := Run(Lookup(c.scenario), seed, Options{})
			worst = max(worst, r.stats.MaxFailover)
		}
		slack := p.Timing.PollInterval + 4*p.RoundTrip
		t.Logf("%s: slowest failover %v over %d seeds; plan's bound %v", c.scenario, worst, seeds, c.bound)
		if worst > c.bound || worst < c.bound-slack {
			t.Errorf("%s: slowest failover %v, plan's bound %v: want within the bound, and within %v of it", c.scenario, worst, c.bound, slack)
		}
	}
}
