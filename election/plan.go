package election

import (
	"fmt"
	"math"
	"time"
)

// Plan is what a Timing means for a group of candidates: how long a leader
// leads, how long a failover can take, and how many store requests the
// group makes. `tenure plan` prints it; the simulator checks its failover
// bounds.
type Plan struct {
	Timing     Timing // with defaults
	Candidates int
	// RoundTrip is the longest store round trip assumed.
	RoundTrip time.Duration

	// LeadWindow: a leader leads for this long after sending each renewal
	// that the store confirms, by its own clock.
	LeadWindow time.Duration
	// TakeoverWait: a follower waits this long, by its own clock, after it
	// last saw the record change before it takes the lease over.
	TakeoverWait time.Duration
	// CrashFailover bounds, in true time, the time from a leader's crash
	// to a new leader: the takeover wait and the longest poll (MaxPoll), stretched by the
	// slowest clock ρ allows, and four round trips (the crashed leader's
	// last write on the wire, the follower's read that sees it, a read in
	// flight when the wait ends, the takeover).
	CrashFailover time.Duration
	// ReleaseFailover bounds the handoff after a graceful release: the
	// longest poll by the slowest clock and four round trips.
	ReleaseFailover time.Duration

	// MeanPoll is a follower's mean time between reads: PollInterval, as
	// polls are drawn in [PollInterval×0.9, PollInterval×1.1].
	MeanPoll time.Duration
	// Per hour: the leader's renewals (writes), one follower's polls
	// (reads), and the group's total.
	RenewalsPerHour, PollsPerHour, RequestsPerHour float64
}

// NewPlan returns the Plan of t (defaults filled in) for the given number of
// candidates and store round trip. It refuses what Timing.Validate refuses.
func NewPlan(t Timing, candidates int, roundTrip time.Duration) (Plan, error) {
	t = t.WithDefaults()
	if err := t.Validate(); err != nil {
		return Plan{}, err
	}
	if candidates < 1 {
		return Plan{}, fmt.Errorf("%d candidates: want at least 1", candidates)
	}
	if roundTrip < 0 || roundTrip > MaxSetting {
		return Plan{}, fmt.Errorf("round trip %v: want within [0, %v]", roundTrip, MaxSetting)
	}
	p := Plan{Timing: t, Candidates: candidates, RoundTrip: roundTrip}
	p.LeadWindow = LeadWindow(t.LeaseDuration, t.MaxDrift, t.Margin)
	p.TakeoverWait = WaitBeforeTakeover(t.LeaseDuration, t.MaxDrift)
	slow := func(d time.Duration) time.Duration { // d on a clock running ρ slow, in true time
		return time.Duration(math.Ceil(float64(d) / (1 - t.MaxDrift)))
	}
	p.CrashFailover = slow(p.TakeoverWait) + slow(MaxPoll(t.PollInterval)) + 4*roundTrip
	p.ReleaseFailover = slow(MaxPoll(t.PollInterval)) + 4*roundTrip
	p.MeanPoll = t.PollInterval
	p.RenewalsPerHour = float64(time.Hour) / float64(t.RenewInterval)
	p.PollsPerHour = float64(time.Hour) / float64(p.MeanPoll)
	p.RequestsPerHour = p.RenewalsPerHour + float64(candidates-1)*p.PollsPerHour
	return p, nil
}

// Prices are list prices in US dollars, for Cost.
type Prices struct {
	Name          string  // e.g. "DynamoDB on-demand, us-east-1"
	Date          string  // when they were read off AWS's pricing pages
	WritePerMil   float64 // per million writes (DynamoDB: write request units)
	ReadPerMil    float64 // per million reads
	WritesPerPut  float64 // units one renewal costs (DynamoDB: 2 beyond 1 KB)
	ReadsPerPoll  float64 // units one poll costs
	WriteVerb     string
	ReadVerb      string
	MonthDuration time.Duration
}

// The list prices `tenure plan` uses: us-east-1, standard tables and
// buckets. They change: check them on AWS's pricing pages.
var (
	DynamoDBOnDemand = Prices{Name: "DynamoDB on-demand, us-east-1", Date: "November 2024",
		WritePerMil: 0.625, ReadPerMil: 0.125, WritesPerPut: 1, ReadsPerPoll: 1,
		WriteVerb: "PutItem (1 WRU)", ReadVerb: "GetItem, strongly consistent (1 RRU)", MonthDuration: 30 * 24 * time.Hour}
	S3Standard = Prices{Name: "S3 Standard, us-east-1", Date: "November 2024",
		WritePerMil: 5, ReadPerMil: 0.4, WritesPerPut: 1, ReadsPerPoll: 1,
		WriteVerb: "PutObject", ReadVerb: "GetObject", MonthDuration: 30 * 24 * time.Hour}
)

// MonthlyCost returns what one lease costs a month at prices: the leader's
// renewals and the followers' polls, in US dollars.
func (p Plan) MonthlyCost(pr Prices) (leader, followers float64) {
	hours := pr.MonthDuration.Hours()
	leader = p.RenewalsPerHour * hours * pr.WritesPerPut * pr.WritePerMil / 1e6
	followers = float64(p.Candidates-1) * p.PollsPerHour * hours * pr.ReadsPerPoll * pr.ReadPerMil / 1e6
	return leader, followers
}
