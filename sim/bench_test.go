package sim

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// benchScenario is five nodes at tenure's default timings (10s lease,
// renewals and polls every 2s) on a healthy store for an hour, the leader
// acting every second: the steady state a deployment spends its life in.
var benchScenario = &Scenario{Name: "bench", build: func(p *plan, r *rand.Rand) { p.Duration = time.Hour }}

// BenchmarkFastTier reports simulated seconds per wall-clock second.
func BenchmarkFastTier(b *testing.B) {
	var simulated time.Duration
	seed := uint64(0)
	for b.Loop() {
		seed++
		simulated += Run(benchScenario, seed, Options{}).SimTime
	}
	b.ReportMetric(simulated.Seconds()/b.Elapsed().Seconds(), "sim-s/s")
}

// BenchmarkFastTierSwarm is the same over swarm's mix of faults.
func BenchmarkFastTierSwarm(b *testing.B) {
	var simulated time.Duration
	seed := uint64(0)
	for b.Loop() {
		seed++
		simulated += Run(Lookup("swarm"), seed, Options{}).SimTime
	}
	b.ReportMetric(simulated.Seconds()/b.Elapsed().Seconds(), "sim-s/s")
}

// BenchmarkRealTier reports simulated seconds per wall-clock second of the
// real tier. synctest needs a *testing.T, which a benchmark lacks, so the
// runs go through testing.RunTests (the go command's own entry point, which
// makes a T), timed by the benchmark around them.
func BenchmarkRealTier(b *testing.B) {
	var simulated time.Duration
	n := b.N
	ran := false
	start := time.Now()
	ok := testing.RunTests(func(_, _ string) (bool, error) { return true, nil }, []testing.InternalTest{{
		Name: "RealTier",
		F: func(t *testing.T) {
			if ran {
				return // RunTests repeats tests under -count
			}
			ran = true
			for seed := uint64(1); seed <= uint64(n); seed++ {
				r := RunReal(t, benchScenario, seed, Options{})
				if r.Failed() {
					t.Fatal(r)
				}
				simulated += r.SimTime
			}
		},
	}})
	if !ok {
		b.Fatal("the real tier failed")
	}
	b.ReportMetric(simulated.Seconds()/time.Since(start).Seconds(), "sim-s/s")
}

// BenchmarkFastTierNodes runs ten minutes of steady state, the leader
// crashing once, with 5, 20 and 100 nodes at default timings: how the
// fast tier's cost grows with the nodes (every follower polls), and with
// a standby (one follower polls; the others every 20s).
//
//	go test ./sim -run '^$' -bench FastTierNodes
func BenchmarkFastTierNodes(b *testing.B) {
	for _, c := range []struct {
		n       int
		standby bool
	}{{5, false}, {20, false}, {100, false}, {5, true}, {20, true}, {100, true}} {
		sc := &Scenario{Name: "nodes", standby: c.standby, build: func(p *plan, r *rand.Rand) {
			p.Nodes = p.Nodes[:0]
			for i := range c.n {
				p.Nodes = append(p.Nodes, newNodeSpec(r, "n"+strconv.Itoa(i)))
			}
			if c.standby {
				withStandby(p)
			}
			crashLeader(p, 5*time.Minute, -1, false)
			p.Duration = 10 * time.Minute
		}}
		name := "nodes=" + strconv.Itoa(c.n)
		if c.standby {
			name += "/standby"
		}
		b.Run(name, func(b *testing.B) {
			var events int64
			seed := uint64(0)
			for b.Loop() {
				seed++
				r := Run(sc, seed, Options{})
				if r.Failed() {
					b.Fatal(r)
				}
				events += r.Events
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
