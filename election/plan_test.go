package election

import (
	"math"
	"testing"
	"time"
)

func TestPlanDefaults(t *testing.T) {
	p, err := NewPlan(Timing{}, 3, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	want := Plan{
		LeadWindow:      8990 * time.Millisecond, // 10s×(1-1e-3) - 1s
		TakeoverWait:    10010 * time.Millisecond,
		CrashFailover:   10020020021 + 2202202203 + 80*time.Millisecond, // the longest poll: 2.2s
		ReleaseFailover: 2202202203 + 80*time.Millisecond,
		MeanPoll:        2 * time.Second,
	}
	if p.LeadWindow != want.LeadWindow || p.TakeoverWait != want.TakeoverWait || p.CrashFailover != want.CrashFailover ||
		p.ReleaseFailover != want.ReleaseFailover || p.MeanPoll != want.MeanPoll {
		t.Fatalf("plan %+v\nwant %+v", p, want)
	}
	if p.RenewalsPerHour != 1800 || p.PollsPerHour != 1800 || p.RequestsPerHour != 5400 {
		t.Fatalf("requests per hour: renewals %v, polls %v, total %v", p.RenewalsPerHour, p.PollsPerHour, p.RequestsPerHour)
	}
	leader, followers := p.MonthlyCost(DynamoDBOnDemand)
	// 1,800/h × 720 h = 1,296,000 WRU at $0.625/M; 2 × 1,800/h × 720 h = 2,592,000 RRU at $0.125/M.
	if math.Abs(leader-0.81) > 1e-9 || math.Abs(followers-0.324) > 1e-9 {
		t.Fatalf("DynamoDB cost: leader %v, followers %v", leader, followers)
	}
}

// TestPlanRefusesWhatValidateRefuses: one check, not two.
func TestPlanRefusesWhatValidateRefuses(t *testing.T) {
	for _, tm := range []Timing{
		{LeaseDuration: time.Second, Margin: 2 * time.Second},
		{LeaseDuration: 10 * time.Second, RenewInterval: 9 * time.Second},
		{LeaseDuration: -time.Second},
		{MaxDrift: 0.5},
	} {
		verr := tm.WithDefaults().Validate()
		_, perr := NewPlan(tm, 3, 0)
		if verr == nil || perr == nil || verr.Error() != perr.Error() {
			t.Errorf("%+v: Validate %v, NewPlan %v", tm, verr, perr)
		}
	}
	if _, err := NewPlan(Timing{}, 0, 0); err == nil {
		t.Error("0 candidates accepted")
	}
}
