// Package plan says what a timing means for a group of candidates: its
// bounds and its cost. `tenure plan` prints it; the simulator checks its
// failover bounds against runs.
package plan

import (
	"fmt"
	"math"
	"time"

	"github.com/tenure-go/tenure/election"
)

// Plan is what a election.Timing means for a group of candidates: how long a leader
// leads, how long a failover can take, and how many store requests the
// group makes. `tenure plan` prints it; the simulator checks its failover
// bounds.
type Plan struct {
	Timing     election.Timing // with defaults
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
	// (reads; with a standby, the standby's), and the group's total.
	RenewalsPerHour, PollsPerHour, RequestsPerHour float64

	// LeaderReadsPerHour: a Candidate's leader reads the standby record
	// once a cold poll (without a standby, ColdPollInterval's default), to
	// hand over to a preferred standby and, with one, to learn its address
	// for notices. Counted in RequestsPerHour.
	LeaderReadsPerHour float64
	// With a standby (election.Timing.ColdPollInterval): the standby's renewals of
	// its record (writes) per hour, and a cold follower's reads per hour
	// (the lease and the standby record, once a cold poll each).
	StandbyRenewalsPerHour, ColdReadsPerHour float64
	// ColdFailover bounds the failover after a crash that leaves no
	// standby (the standby crashed too): a cold follower's first sight of
	// the last record, the takeover wait and one more cold poll, on the
	// slowest clock, and four round trips. With a live standby the bound
	// is CrashFailover.
	ColdFailover time.Duration
	// WakeHandoff bounds the handoff after a release when the standby is
	// woken (Config.WakeAddr): the release, the read of the standby's
	// address, the wake-up, the standby's read and its takeover, each at
	// most a round trip.
	WakeHandoff time.Duration

	// With a standby and renewal notices (Config.WakeAddr; WithNotices):
	// NoticeFailover bounds the failover
	// after a crash once the standby had the notice of the leader's last
	// renewal (the takeover wait on a clock ρ slow, from that renewal's
	// answer, and five round trips: the notice, the read it prompts, a read
	// in flight, a read before the takeover and the takeover); the crash
	// falling anywhere between two renewals, the median failover is about
	// NoticeFailoverMedian, the wait less half a renewal interval. Without
	// the notice of the last renewal (a crash with one on its way), the
	// bound is CrashFailover.
	Notices              bool
	NoticeFailover       time.Duration
	NoticeFailoverMedian time.Duration

	// On a store with a change feed (lease.Watcher: Kubernetes, etcd,
	// PostgreSQL; WithFeed): followers time each renewal from the event
	// that tells of it and read only to act (election.Machine.NoticeRecord),
	// so FeedReadsPerHour is 0 while the leader renews; each candidate
	// holds two watches (the lease and its standby record), started again
	// WatchRestartsPerHour times an hour each where the server ends them;
	// the leader reads the standby record only when the feed tells of a
	// write. A change of leader costs ReadsPerTakeover reads: each
	// follower reads the new term once, and the one that takes over reads
	// when the feed goes quiet and before its write. FeedHandoff bounds
	// the handoff after a release (the event, the read it prompts, the
	// takeover); after a crash the bound is NoticeFailover's, from the
	// leader's last renewal, and the median NoticeFailoverMedian's.
	Feed                 bool
	FeedHandoff          time.Duration
	FeedReadsPerHour     float64
	WatchRestartsPerHour float64
	ReadsPerTakeover     int
}

// WithFeed returns p for a store whose change feed tells every candidate
// of each write of the lease and of its standby record (lease.Watcher),
// whose server ends a watch restarts times an hour (0: never): no reads
// while the leader renews, a release found at once. With a standby, the
// cold followers still read the standby record once a cold poll.
func (p Plan) WithFeed(restarts float64) Plan {
	if p.Feed {
		return p
	}
	t := p.Timing
	p.Feed = true
	slowWait := time.Duration(math.Ceil(float64(p.TakeoverWait) / (1 - t.MaxDrift)))
	p.NoticeFailover = slowWait + 5*p.RoundTrip
	p.NoticeFailoverMedian = p.TakeoverWait - t.RenewInterval/2 + 3*p.RoundTrip
	p.FeedHandoff = 3 * p.RoundTrip
	p.FeedReadsPerHour, p.LeaderReadsPerHour, p.WatchRestartsPerHour = 0, 0, restarts
	p.ReadsPerTakeover = p.Candidates - 1 + 2
	p.RequestsPerHour = p.RenewalsPerHour + float64(p.Candidates)*2*restarts
	if t.ColdPollInterval > 0 {
		if p.Candidates >= 2 {
			p.RequestsPerHour += p.StandbyRenewalsPerHour
		}
		p.RequestsPerHour += float64(max(p.Candidates-2, 0)) * p.ColdReadsPerHour / 2
	}
	return p
}

// WithNotices returns p for candidates that send the standby renewal
// notices (Config.WakeAddr). It needs a standby (election.Timing.ColdPollInterval).
func (p Plan) WithNotices() Plan {
	t := p.Timing
	if t.ColdPollInterval == 0 || p.Notices {
		return p
	}
	p.Notices = true
	slowWait := time.Duration(math.Ceil(float64(p.TakeoverWait) / (1 - t.MaxDrift)))
	p.NoticeFailover = slowWait + 5*p.RoundTrip
	p.NoticeFailoverMedian = p.TakeoverWait - t.RenewInterval/2 + 3*p.RoundTrip
	if p.Candidates >= 2 {
		// The standby times each renewal from its notice and reads only
		// to act (election.Machine.NoticeRecord): no polls while they come.
		p.RequestsPerHour -= p.PollsPerHour
		p.ReadsPerTakeover = 2
	}
	return p
}

// New returns the Plan of t (defaults filled in) for the given number of
// candidates and store round trip. It refuses what election.Timing.Validate refuses.
func New(t election.Timing, candidates int, roundTrip time.Duration) (Plan, error) {
	t = t.WithDefaults()
	if err := t.Validate(); err != nil {
		return Plan{}, err
	}
	if candidates < 1 {
		return Plan{}, fmt.Errorf("%d candidates: want at least 1", candidates)
	}
	if roundTrip < 0 || roundTrip > election.MaxSetting {
		return Plan{}, fmt.Errorf("round trip %v: want within [0, %v]", roundTrip, election.MaxSetting)
	}
	p := Plan{Timing: t, Candidates: candidates, RoundTrip: roundTrip}
	p.LeadWindow = election.LeadWindow(t.LeaseDuration, t.MaxDrift, t.Margin)
	p.TakeoverWait = election.WaitBeforeTakeover(t.LeaseDuration, t.MaxDrift)
	slow := func(d time.Duration) time.Duration { // d on a clock running ρ slow, in true time
		return time.Duration(math.Ceil(float64(d) / (1 - t.MaxDrift)))
	}
	p.CrashFailover = slow(p.TakeoverWait) + slow(election.MaxPoll(t.PollInterval)) + 4*roundTrip
	p.ReleaseFailover = slow(election.MaxPoll(t.PollInterval)) + 4*roundTrip
	p.MeanPoll = t.PollInterval
	perHour := func(d time.Duration) float64 { return float64(time.Hour) / float64(d) }
	p.RenewalsPerHour = perHour(t.RenewInterval)
	p.PollsPerHour = perHour(p.MeanPoll)
	// Every leader reads the standby record once a cold poll (a
	// standby's, or without one its default): it hands over to a
	// preferred standby.
	p.LeaderReadsPerHour = perHour(t.WithStandby().ColdPollInterval)
	p.RequestsPerHour = p.RenewalsPerHour + p.LeaderReadsPerHour + float64(candidates-1)*p.PollsPerHour
	if c := t.ColdPollInterval; c > 0 {
		st := election.StandbyTiming(t)
		p.StandbyRenewalsPerHour = perHour(st.RenewInterval)
		p.ColdReadsPerHour = 2 * perHour(c)
		p.ColdFailover = slow(election.MaxPoll(c)) + slow(p.TakeoverWait) + slow(election.MaxPoll(c)) + 4*roundTrip
		p.WakeHandoff = 5 * roundTrip
		p.RequestsPerHour = p.RenewalsPerHour + p.LeaderReadsPerHour
		if candidates >= 2 {
			p.RequestsPerHour += p.PollsPerHour + p.StandbyRenewalsPerHour
		}
		p.RequestsPerHour += float64(max(candidates-2, 0)) * p.ColdReadsPerHour
	}
	return p, nil
}
