// Package userworld joins package sim, which has the world, to package
// simtest, which lends it to users: sim fills in New when it is
// initialised, and simtest wraps what New returns in its public types. It
// is internal so that neither side's exported API grows for the other.
package userworld

import (
	"context"
	"io"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/lease"
)

// Spec describes one seed's world.
type Spec struct {
	Seed  uint64
	Nodes int
	// Lease is the lease the store models in full: lost records and stale
	// reads act on it, and a node that acts without a token is held to it.
	Lease string
	// Scenario names the simulator scenario whose faults the seed draws;
	// "" draws none.
	Scenario string
	// Duration is when every process is stopped; zero: the scenario's.
	Duration time.Duration
	// Timing is every node's lease timing (zero fields: the defaults).
	Timing tenure.Timing
	// Unfenced: the resource checks no token, and accepts every write.
	Unfenced bool
	Trace    io.Writer
	Timeline bool
	// Program runs on every process of every node, on a goroutine of its
	// own, and must return once n.Context() is done.
	Program func(n Node)
	// Script schedules the test's own faults before the run.
	Script func(w World)
}

// Node is one process of a node: a restart is a new one.
type Node interface {
	Name() string
	Context() context.Context
	Runtime() tenure.Runtime
	Clock() tenure.Clock
	Store() lease.Store
	// Act records an effect (fenced: a write to the fenced resource), with
	// the fence the code had, if any; it returns once the world took it.
	Act(a Act) error
	// Assert records a user check: Always when always, else Sometimes.
	Assert(always, cond bool, msg string)
}

// World is a seed's world, for the test's script.
type World interface {
	// At runs f at true time d, on the scheduler, between events.
	At(d time.Duration, f func())
	Now() time.Duration
	Nodes() []string
	// Leader names the node whose process holds Spec.Lease now, by the
	// store; "" when none does.
	Leader() string
	Pause(node string, d time.Duration, freeze bool)
	// PauseAtAct pauses node for d right before its next act: between
	// the code's check of its term and its effect.
	PauseAtAct(node string, d time.Duration)
	Crash(node string)
	Restart(node string)
	Cut(node string, d time.Duration)
	StepWall(node string, d time.Duration)
	LoseRecord()
	// Run plays the world to its end; call it inside a synctest bubble.
	Run() Outcome
}

// ActKind says what an act was.
type ActKind int

const (
	Effect  ActKind = iota + 1 // an unfenced side effect
	Write                      // a write the fenced resource accepted
	Refused                    // a write it refused
)

// Act is one act of a node's code, as recorded.
type Act struct {
	At     time.Duration // true time
	Node   string
	ID     string // the process's tenure ID
	Kind   ActKind
	What   string
	Fenced bool          // the code had a fence (its term's context)
	Fence  fencing.Fence // when Fenced
	Err    string        // Refused: why
}

// Outcome is what a run recorded and found.
type Outcome struct {
	Failures  []string        // built-in and Always checks that failed, in order
	Acts      []Act           // every act, in order
	Sometimes map[string]bool // each Sometimes message: whether it held once
	Hash      uint64          // of the trace: equal seeds give equal hashes
	Leaked    bool            // goroutines outlive the run (among Failures)
	SimTime   time.Duration
	Events    int64
	// SVG draws the run's timeline (with Spec.Timeline).
	SVG func(io.Writer) error
}

// New makes a world, and Scenarios lists the scenarios a world may draw
// its faults from; package sim sets both.
var (
	New       func(Spec) (World, error)
	Scenarios func() []string
)
