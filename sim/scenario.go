package sim

import (
	"cmp"
	"hash/fnv"
	"math/rand/v2"
	"time"

	"github.com/tenure-go/tenure/election"
)

// Scenario is a named fault schedule. Its plan is drawn from a seed: the
// same seed gives the same plan, and the same run.
type Scenario struct {
	Name    string
	Summary string
	locks   bool // its nodes run lock clients (LockPlan), not Candidates
	standby bool // its Candidates run with a standby
	group   bool // its nodes run group members (GroupPlan)
	nodes   int  // how many nodes the plan starts from; zero: five
	build   func(p *plan, r *rand.Rand)
}

// plan is what a Scenario draws for one seed: the nodes, the store, the
// actions over time, and the invariants the run must keep.
type plan struct {
	Nodes    []*nodeSpec
	Duration time.Duration // when the shutdown of every instance begins
	Latency  latency       // the store's latency while healthy
	Faults   faults        // the store's standing faults
	Work     time.Duration // the leader acts this often
	Act      time.Duration // from its check of the term to its write
	Slow     *slow         // slow callbacks; nil: every callback is quick
	Requires Set           // invariants the run must keep
	// Failover: crashes expect a new leader within the failover bound. Off
	// where answers may be lost or writes delayed: the bound assumes
	// latency bounded by Latency.Bound().
	Failover bool
	// Locks: what the lock clients of a lock scenario do.
	Locks *lockPlan
	// Group: the group of a group scenario's members.
	Group *groupPlan
	// StaleReads: followers poll with reads a stale answer may serve (as
	// with DynamoDB's eventually consistent GetItem); Faults.StalePPM
	// says how many are.
	StaleReads bool
	// Wake: with a standby (the nodes' Timing.ColdPollInterval), a leader
	// that releases wakes the standby, and a leader sends it a renewal
	// notice after each confirmed renewal (Runtime.WakeAddr), over a
	// network with these faults; nil: no wake-ups, no notices.
	Wake *wakeFaults
	// Feed: the store has a change feed (lease.Watcher) with these faults:
	// every write of the lease is told to every live Candidate, which reads
	// on it as on a renewal notice; nil: none.
	Feed *wakeFaults
	// ForgeRenewals: forged feed events (Feed.ForgeEvery) include renewals
	// of the term the store holds under versions never written or long
	// gone: they delay takeovers (a follower times them), and a scenario
	// that has them promises no failover bound.
	ForgeRenewals bool
	// Lossy: the store may lose acknowledged writes (lease.Lossy, as
	// Redis and NATS may): candidates mint every takeover's token from the
	// wall clock, and world.failover rolls the store back.
	Lossy bool

	actions []action
}

// wakeFaults are the faults of the network that carries wake-ups and
// renewal notices, in parts per million: lost, duplicated, and delayed by
// up to DelayMax beyond the store's latency. With ForgeEvery, forged
// notices (ForgeBurst at once) reach a live instance at random, one burst
// every ForgeEvery on average.
type wakeFaults struct {
	LossPPM, DupPPM, DelayPPM int
	DelayMax                  time.Duration
	ForgeEvery                time.Duration
	ForgeBurst                int
}

type action struct {
	at time.Duration
	f  func(w *world)
}

// nodeSpec describes a host and the Candidates that run on it.
type nodeSpec struct {
	Name       string
	Start      time.Duration   // when its first process starts; negative: not by itself
	MonoOffset time.Duration   // monotonic reading at true time zero
	WallOffset time.Duration   // wall reading minus monotonic reading
	PPB        int64           // clock rate error, parts per billion
	Timing     election.Timing // zero fields take their defaults
	// Priority is Config.Priority of the node's next process (a scenario
	// may change it before a restart: a new version). With a standby.
	Priority int
	// PriorityHoldOff is Config.PriorityHoldOff; zero: its default.
	PriorityHoldOff time.Duration
}

// slow makes callbacks slow: one call in OneIn takes up to the given time.
type slow struct {
	OneIn   int
	Cleanup time.Duration // OnElected, after its context is done
	Demoted time.Duration // OnDemoted
	Leader  time.Duration // OnLeaderChange
}

type slowKind int

const (
	slowCleanup slowKind = iota + 1
	slowDemoted
	slowLeader
)

// slow draws how long a callback takes. Both tiers call it from the
// callback goroutine (OnLeaderChange: from its own), in the same order, so
// the draws agree.
func (in *instance) slow(k slowKind) time.Duration {
	s := in.w.plan.Slow
	if s == nil {
		return 0
	}
	var most time.Duration
	switch k {
	case slowCleanup:
		most = s.Cleanup
	case slowDemoted:
		most = s.Demoted
	case slowLeader:
		most = s.Leader
	}
	r := in.cbRand
	if k == slowLeader {
		r = in.lcRand
	}
	if most <= 0 || r.IntN(max(s.OneIn, 1)) != 0 {
		return 0
	}
	return uniform(r, time.Millisecond, most)
}

func (p *plan) at(t time.Duration, f func(w *world)) {
	p.actions = append(p.actions, action{at: t, f: f})
}

func (s *Scenario) plan(seed uint64) *plan {
	h := fnv.New64a()
	h.Write([]byte(s.Name))
	r := rand.New(rand.NewPCG(seed, h.Sum64()))
	p := defaultPlan(r, cmp.Or(s.nodes, 5))
	s.build(p, r)
	return p
}

// Defaults every scenario starts from: five nodes at tenure's default
// timings (10s lease, renewals and polls every 2s), clocks that drift
// within ρ and boot at different times but agree on the time of day
// within 50ms, and a healthy store whose answers take 0.5 to 10ms, with
// one in 50 up to 200ms.
var (
	healthyLatency = latency{Min: 500 * time.Microsecond, Max: 10 * time.Millisecond, TailOneIn: 50, TailMax: 200 * time.Millisecond}
	rhoPPB         = ppbOf(0.001) // tenure.DefaultMaxDrift
)

func defaultPlan(r *rand.Rand, nodes int) *plan {
	p := &plan{
		Duration: 5 * time.Minute,
		Latency:  healthyLatency,
		Work:     time.Second,
		Act:      time.Millisecond,
		Requires: All,
		Failover: true,
	}
	for i := range nodes {
		p.Nodes = append(p.Nodes, newNodeSpec(r, string(rune('a'+i))))
	}
	return p
}

func newNodeSpec(r *rand.Rand, name string) *nodeSpec {
	boot := uniform(r, -time.Hour, time.Hour)
	return &nodeSpec{
		Name:       name,
		Start:      uniform(r, 0, 2*time.Second),
		MonoOffset: boot,
		WallOffset: uniform(r, -50*time.Millisecond, 50*time.Millisecond) - boot,
		PPB:        int64(uniform(r, -time.Duration(rhoPPB), time.Duration(rhoPPB))),
	}
}

// skew sets n's wall clock to run s ahead of true time (behind if s < 0).
func (n *nodeSpec) skew(s time.Duration) {
	n.WallOffset = s - n.MonoOffset
}

// Scenarios returns every scenario, in the order of the issue that defined
// them.
func Scenarios() []*Scenario { return scenarios }

// Lookup returns the scenario called name, or nil.
func Lookup(name string) *Scenario {
	for _, s := range scenarios {
		if s.Name == name {
			return s
		}
	}
	return nil
}
