package simtest

import (
	"testing"
	"time"
)

// BenchmarkCronHour: a three-node cron job (programs[0], fixed) over one
// simulated hour, each seed drawing one of its fault sets; seeds/s is the
// figure of docs/performance.md. Run goes through testing.RunTests, as
// synctest needs a *testing.T.
func BenchmarkCronHour(b *testing.B) {
	p := programs[0]
	cfg := p.cfg
	cfg.Duration, cfg.Seeds = time.Hour, b.N
	ran := false
	start := time.Now()
	ok := testing.RunTests(func(_, _ string) (bool, error) { return true, nil }, []testing.InternalTest{{
		Name: "CronHour",
		F: func(t *testing.T) {
			if ran {
				return // RunTests repeats tests under -count
			}
			ran = true
			Run(t, cfg, p.fixed)
		},
	}})
	if !ok {
		b.Fatal("a seed failed")
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "seeds/s")
}
