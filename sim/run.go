package sim

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Strategy is the leader-election logic the instances run.
type Strategy int

const (
	// Tenure runs tenure's election.Machine (fast tier) or tenure.Candidate
	// (real tier).
	Tenure Strategy = iota
	// Naive judges expiry by wall-clock timestamps stored in the record.
	// Fast tier only.
	Naive
)

func (s Strategy) String() string {
	if s == Naive {
		return "naive"
	}
	return "tenure"
}

// Resource says how the resource the leaders write to is protected.
type Resource int

const (
	// Fenced puts a fencing.Guard in front of the resource.
	Fenced Resource = iota
	// Unfenced accepts every write; the checker flags stale ones.
	Unfenced
)

func (r Resource) String() string {
	if r == Unfenced {
		return "unfenced"
	}
	return "fenced"
}

// Options choose what a run uses and what it records.
type Options struct {
	Strategy Strategy
	Resource Resource
	Trace    io.Writer // the event trace as text; nil for none (its hash is always kept)
	Timeline bool      // keep what Result.WriteSVG draws

	// trustFeed makes every Candidate take the lease on the next read
	// after a feed event, whoever holds it (election.Config.Preempt): a
	// follower that lets an event shorten its takeover, for the tests
	// that prove the checker catches one.
	trustFeed bool
	// trustRecords makes every feed event carry the record of the term
	// before it (holder, token, lease duration) as if that term went on:
	// a follower that times a record whose content it has not read, for
	// the tests that prove the checker catches one.
	trustRecords bool
	// plainTokens mints tokens as on a store that loses nothing, even on a
	// Lossy one (no election.Config.ClockTokens): for the test that
	// proves the checker catches a lost takeover's token minted again.
	plainTokens bool
}

// Result is what a run found.
type Result struct {
	Scenario string
	Seed     uint64
	Tier     string // "fast" or "real"
	Options  Options
	Requires Set // invariants the scenario promises for this seed

	Counts     [numInvariants + 1]int // violations per invariant (Counts[I1] ...)
	Violations []Violation            // the first few, in order
	stats      runStats

	SimTime time.Duration // true time simulated
	Wall    time.Duration // wall-clock time the run took
	Events  int64         // events processed
	Lines   int64         // trace lines
	Hash    uint64        // hash of the trace: equal seeds give equal hashes

	timeline *drawing // with Options.Timeline
}

// Failed reports whether the run broke an invariant its scenario promises.
func (r *Result) Failed() bool {
	for i := Invariant(1); int(i) <= numInvariants; i++ {
		if r.Requires.Has(i) && r.Counts[i] > 0 {
			return true
		}
	}
	return false
}

// Failures returns the kept violations of promised invariants.
func (r *Result) Failures() []Violation {
	var out []Violation
	for _, v := range r.Violations {
		if r.Requires.Has(v.Inv) {
			out = append(out, v)
		}
	}
	return out
}

func (r *Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s seed %d (%s tier, %v, %v): %v simulated, %d events, %d terms, trace %016x",
		r.Scenario, r.Seed, r.Tier, r.Options.Strategy, r.Options.Resource, r.SimTime.Round(time.Millisecond), r.Events, r.stats.Terms, r.Hash)
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "\n  %v", v)
		if !r.Requires.Has(v.Inv) {
			b.WriteString(" (not promised here)")
		}
	}
	return b.String()
}

// Run runs scenario sc with seed on the fast tier: the production entries
// (internal/engine) on the production host.Core, stepped on one goroutine,
// with election.Machine or the naive strategy.
func Run(sc *Scenario, seed uint64, opt Options) *Result {
	start := time.Now()
	w := newWorld(sc, seed, opt, newProcess)
	w.settle = func(*instance) { w.flush() }
	w.run()
	w.finish()
	r := w.result("fast")
	r.Wall = time.Since(start)
	return r
}

func (w *world) finish() {
	w.chk.finish()
	w.tr.flush()
}

func (w *world) result(tier string) *Result {
	c := w.chk
	r := &Result{
		Scenario:   w.sc.Name,
		Seed:       w.seed,
		Tier:       tier,
		Options:    w.opt,
		Requires:   w.plan.Requires,
		Counts:     c.counts,
		Violations: c.viol,
		stats:      c.stats,
		SimTime:    w.now,
		Events:     w.events,
		Lines:      w.tr.lines,
		Hash:       w.tr.h,
		timeline:   w.tl,
	}
	r.Options.Trace = nil
	if w.tl != nil {
		w.tl.finish(w)
	}
	return r
}
