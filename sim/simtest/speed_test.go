package simtest

import (
	"testing"
	"time"
)

// TestCronHour is the speed figure of docs/performance.md: a three-node
// cron job over one simulated hour under the faults of noZombies, as many
// seeds as -simtest.seeds says; time it from outside:
//
//	go test -c -o /tmp/simtest.test ./sim/simtest
//	/usr/bin/time -v /tmp/simtest.test -test.run '^TestCronHour$' -simtest.seeds 2000
func TestCronHour(t *testing.T) {
	p := programs[0]
	cfg := p.cfg
	cfg.Duration, cfg.Seeds = time.Hour, 20
	Run(t, cfg, p.fixed)
}
