package plan

import (
	"math"
	"testing"
	"time"

	"github.com/tenure-go/tenure/election"
)

func TestPlanDefaults(t *testing.T) {
	p, err := New(election.Timing{}, 3, 20*time.Millisecond)
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
	// The leader's reads of the standby record, once 20s: 180.
	if p.RenewalsPerHour != 1800 || p.PollsPerHour != 1800 || p.LeaderReadsPerHour != 180 || p.RequestsPerHour != 5580 {
		t.Fatalf("requests per hour: renewals %v, polls %v, leader's reads %v, total %v", p.RenewalsPerHour, p.PollsPerHour, p.LeaderReadsPerHour, p.RequestsPerHour)
	}
}

// TestPlanRefusesWhatValidateRefuses: one check, not two.
func TestPlanRefusesWhatValidateRefuses(t *testing.T) {
	for _, tm := range []election.Timing{
		{LeaseDuration: time.Second, Margin: 2 * time.Second},
		{LeaseDuration: 10 * time.Second, RenewInterval: 9 * time.Second},
		{LeaseDuration: -time.Second},
		{MaxDrift: 0.5},
	} {
		verr := tm.WithDefaults().Validate()
		_, perr := New(tm, 3, 0)
		if verr == nil || perr == nil || verr.Error() != perr.Error() {
			t.Errorf("%+v: Validate %v, plan.New %v", tm, verr, perr)
		}
	}
	if _, err := New(election.Timing{}, 0, 0); err == nil {
		t.Error("0 candidates accepted")
	}
}

// With a standby, requests per hour grow by a cold follower's two reads a
// cold poll per candidate, not by a poll every PollInterval.
func TestPlanStandby(t *testing.T) {
	tm := election.Timing{LeaseDuration: 3 * time.Second, RenewInterval: time.Second, PollInterval: time.Second, ColdPollInterval: 10 * time.Second}
	for _, c := range []struct {
		n    int
		want float64
	}{
		// leader 3,600 renewals + 360 reads of the standby record;
		// standby 3,600 polls + 360 renewals; each cold follower 2 × 360
		// reads. Alone, the leader still reads the standby record.
		{1, 3960}, {2, 7920}, {3, 8640}, {5, 10080}, {10, 13680}, {20, 20880},
	} {
		p, err := New(tm, c.n, 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if p.RequestsPerHour != c.want {
			t.Errorf("%d candidates: %v requests per hour, want %v", c.n, p.RequestsPerHour, c.want)
		}
	}
	p, _ := New(tm, 3, 10*time.Millisecond)
	// 11s first sight + 3.003s wait + 11s, on a clock 0.1% slow, + 4 × 10ms.
	if want := time.Duration(math.Ceil(11e9/0.999))*2 + time.Duration(math.Ceil(3.003e9/0.999)) + 40*time.Millisecond; p.ColdFailover != want {
		t.Errorf("cold failover %v, want %v", p.ColdFailover, want)
	}
}

// TestPlanNotices: the leader reads the standby record once a cold poll
// (360 an hour here), notices or not; with renewal notices the standby
// times each renewal from its notice and does not poll, and a failover
// after a noticed renewal is bounded by the wait and 5 round trips; its
// median is the wait less half a renewal interval.
func TestPlanNotices(t *testing.T) {
	tm := election.Timing{LeaseDuration: 3 * time.Second, RenewInterval: time.Second, PollInterval: time.Second, ColdPollInterval: 10 * time.Second}
	for n, want := range map[int]float64{1: 3960, 2: 4320, 3: 5040, 10: 10080, 20: 17280} {
		p, err := New(tm, n, 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.WithNotices().WithNotices().RequestsPerHour; got != want {
			t.Errorf("%d candidates: %v requests per hour, want %v", n, got, want)
		}
	}
	p, _ := New(tm, 3, 10*time.Millisecond)
	p = p.WithNotices()
	if want := time.Duration(math.Ceil(3.003e9/0.999)) + 50*time.Millisecond; p.NoticeFailover != want {
		t.Errorf("notice failover %v, want %v", p.NoticeFailover, want)
	}
	if want := 3003*time.Millisecond - 500*time.Millisecond + 30*time.Millisecond; p.NoticeFailoverMedian != want {
		t.Errorf("median %v, want %v", p.NoticeFailoverMedian, want)
	}
	if p, _ := New(election.Timing{}, 3, 0); p.WithNotices().Notices {
		t.Error("notices without a standby")
	}
}

// On a store with a change feed, a release is found at once (3 round
// trips) and a crash is bounded from the leader's last renewal, as with
// notices; followers time renewals from the feed and read only to act:
// at client-go's default lease (15s, renewals every 3s) the leader's 1,200
// renewals an hour, and two watches a candidate, started again 4 times in
// 3 hours each (the API server's).
func TestPlanFeed(t *testing.T) {
	tm := election.Timing{LeaseDuration: 15 * time.Second, RenewInterval: 3 * time.Second, PollInterval: 3 * time.Second}
	for n, want := range map[int]float64{1: 1200 + 8.0/3, 3: 1208, 10: 1200 + 80.0/3} {
		p, err := New(tm, n, 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		p = p.WithFeed(4.0 / 3).WithFeed(0)
		if math.Abs(p.RequestsPerHour-want) > 1e-9 {
			t.Errorf("%d candidates: %v requests per hour, want %v", n, p.RequestsPerHour, want)
		}
		if p.FeedReadsPerHour != 0 || p.LeaderReadsPerHour != 0 || p.FeedHandoff != 30*time.Millisecond || p.ReadsPerTakeover != n+1 {
			t.Errorf("%d candidates: %v reads an hour per follower, %v of the leader's, handoff %v, %d reads a takeover; want none, none, 30ms, %d",
				n, p.FeedReadsPerHour, p.LeaderReadsPerHour, p.FeedHandoff, p.ReadsPerTakeover, n+1)
		}
		if want := time.Duration(math.Ceil(15.015e9/0.999)) + 50*time.Millisecond; p.NoticeFailover != want {
			t.Errorf("failover %v, want %v", p.NoticeFailover, want)
		}
	}
	// With a standby: its renewals of its record, and the cold followers'
	// reads of it; no reads of the lease.
	p, _ := New(tm.WithStandby(), 10, 0)
	if got, want := p.WithFeed(0).RequestsPerHour, 1200+p.StandbyRenewalsPerHour+8*p.ColdReadsPerHour/2; got != want {
		t.Errorf("with a standby: %v requests per hour, want %v", got, want)
	}
}
