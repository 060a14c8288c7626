// Package simtest runs your own leader, lock and group code in tenure's
// simulated world, under the faults that break such code in production:
// process pauses and VM suspends (zombie leaders), clock skew, drift and
// steps, partitions, slow, lost and late store answers, lost records,
// crashes and restarts.
//
// A test gives Run a program. Every node of the world runs it, as its own
// process: the program builds its tenure.Candidate, Locker or Group with the
// node's Runtime and Store, runs its real callbacks, and records what it
// does to the outside world with World.Effect (a side effect that carries no
// token: an e-mail, a payment) or World.Write (a write to a resource that
// checks fencing tokens, as fencing.Guard does). The world is the one that
// proves tenure itself (package sim's real tier): the same clocks, store,
// network and scheduler, with the program in place of tenure's own.
//
//	func TestInvoices(t *testing.T) {
//		simtest.Run(t, simtest.Config{Faults: []string{"gc-pause", "leader-crash"}},
//			func(w *simtest.World, n *simtest.Node) {
//				c, _ := tenure.New(tenure.Config{Lease: "leader", Store: n.Store(), Runtime: n.Runtime(),
//					Callbacks: tenure.Callbacks{OnElected: func(ctx context.Context, term tenure.Term) {
//						for ctx.Err() == nil {
//							w.Effect(n, "sent the invoices")
//							<-n.Clock().After(time.Minute)
//						}
//					}}})
//				_ = c.Run(n.Context())
//			})
//	}
//
// # What it checks
//
// For every seed (a subtest "seed=N"), the world holds the program's acts to
// the store's truth:
//
//   - An effect is made as the holder of the lease whose fence its context
//     carries (EffectContext), or else of every lease its process ever
//     held (Config.Lease if none): when another process holds one of them
//     at that instant of true time, the seed fails, naming the holder, its
//     token, and the faults (a pause, a clock step) that touched either
//     node since two leases before.
//   - The fenced resource refuses a write without a token, or with a token
//     below one it accepted for the same lease, and never accepts one.
//   - Always, Sometimes (over all seeds of Run), and Config.Check over the
//     whole history.
//   - tenure's own promises that hold under the seed's faults (one leader
//     unless a process was paused; tokens that increase unless the record
//     was lost or restored), and that no goroutine outlives the run.
//
// A failing seed prints the command that replays it, and writes its trace
// and its timeline (an SVG with the program's acts on it) to files it names.
// The same seed gives the same trace, byte for byte, as long as the program
// waits only on the node's clock, store and context (flag -simtest.twice
// runs every seed twice and compares).
//
// # What the world cannot see
//
// The world moves its own clocks, not the runtime's: code under test must
// take its time from Node.Clock (or the Runtime's Clock), not time.Now,
// time.Sleep, time.After or context.WithTimeout, which do not advance
// (a goroutine left waiting on them is reported when the run ends). A
// process pause holds what the process waits for on the world (its clock,
// its store, its acts), not a goroutine spinning on its own. Effects the
// program does not record are not checked; a semaphore's holders are held
// to their slots through EffectContext. docs/testing.md says more.
package simtest

import (
	"bytes"
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/lease"
	_ "github.com/tenure-go/tenure/sim" // the world: it fills in userworld.New
	"github.com/tenure-go/tenure/sim/internal/userworld"
)

var (
	flagSeeds = flag.Int("simtest.seeds", 0, "simtest: run this many seeds per Run instead of Config.Seeds")
	flagFirst = flag.Uint64("simtest.seed", 0, "simtest: start at this seed instead of Config.FirstSeed")
	flagTwice = flag.Bool("simtest.twice", false, "simtest: run every seed twice and fail when the traces differ")
	flagTrace = flag.Bool("simtest.trace", false, "simtest: log the trace of every seed, not only of failing ones")
)

// Config describes the world of a Run.
type Config struct {
	// Nodes is how many nodes run the program. Default 3; with Faults, 3
	// to 5.
	Nodes int
	// Lease is the lease that the store's faults (lost records, stale
	// reads) act on, and that an effect made by a process that never held
	// anything is held to. Default "leader".
	Lease string
	// Faults names the simulator's scenarios (tenure sim -list) whose
	// faults the seeds draw: seed s draws Faults[s % len(Faults)]. "all"
	// stands for every scenario a program can run under (Scenarios). None:
	// the nodes start within 2s of each other, their clocks drift within
	// tenure's bound, and the store answers in 0.5 to 200ms; Script adds
	// faults of its own.
	Faults []string
	// Duration is when every process is stopped (its Context done).
	// Default: the fault set's own, or 5 minutes without one.
	Duration time.Duration
	// Timing is every node's lease timing; zero fields take tenure's
	// defaults. Pass the same to the program's configs.
	Timing tenure.Timing
	// Seeds is how many seeds to run, from FirstSeed (default 1). Default
	// 100; -simtest.seeds overrides it.
	Seeds     int
	FirstSeed uint64
	// Unfenced makes the world's resource check no token, as most stores
	// do: it accepts every write, and the seed fails on one whose token is
	// below one it accepted for the same lease (what a fence would have
	// refused). It shows what fencing buys.
	Unfenced bool
	// Script, if set, schedules the test's own faults before each seed
	// runs: w.At(d, func() { w.Pause(w.Leader(), 30*time.Second) }).
	Script func(w *World)
	// Check, if set, judges the whole history once a seed has run.
	Check func(h *History) error
}

// resolved fills in the defaults, and the fault sets the seeds draw from.
func (cfg Config) resolved() (Config, []string) {
	cfg.Nodes = cmp.Or(cfg.Nodes, 3)
	cfg.Lease = cmp.Or(cfg.Lease, "leader")
	cfg.Seeds = cmp.Or(*flagSeeds, cfg.Seeds, 100)
	faults := cfg.Faults
	if slices.Contains(faults, "all") {
		faults = Scenarios()
	}
	return cfg, faults
}

// scenarioOf is the fault set seed draws.
func scenarioOf(faults []string, seed uint64) string {
	if len(faults) == 0 {
		return ""
	}
	return faults[seed%uint64(len(faults))]
}

// Scenarios returns the names Config.Faults may take.
func Scenarios() []string { return userworld.Scenarios() }

// Run runs program on every node of a world, once per seed, each seed in a
// subtest named "seed=N", as many at once as there are processors. The program must return once
// n.Context() is done: at the end of the run, and when the node crashes.
// A crashed node that restarts runs it again, as a new process.
func Run(t *testing.T, cfg Config, program func(w *World, n *Node)) {
	t.Helper()
	cfg, faults := cfg.resolved()
	first := cmp.Or(*flagFirst, cfg.FirstSeed, 1)
	var mu sync.Mutex
	some := map[string]bool{}
	// A seed per processor at a time: parallel subtests would all wait at
	// once, and every run lists the process's goroutines for leaks.
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for seed := first; seed < first+uint64(cfg.Seeds); seed++ {
		g.Go(func() error {
			t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
				out := runSeed(t, cfg, faults, seed, program)
				mu.Lock()
				defer mu.Unlock()
				for msg, held := range out.Sometimes {
					some[msg] = some[msg] || held
				}
			})
			return nil
		})
	}
	_ = g.Wait()
	var never []string
	for msg, held := range some {
		if !held {
			never = append(never, msg)
		}
	}
	slices.Sort(never)
	for _, msg := range never {
		t.Errorf("sometimes: %q never held in %d seeds", msg, cfg.Seeds)
	}
}

// shown is how many of a seed's failures its message lists.
const shown = 5

// runSeed runs one seed, and on a failure runs it again with its trace and
// timeline to show them.
func runSeed(t *testing.T, cfg Config, faults []string, seed uint64, program func(*World, *Node)) userworld.Outcome {
	scenario := scenarioOf(faults, seed)
	var trace bytes.Buffer
	show := *flagTrace
	out, err := play(t, cfg, scenario, seed, program, show, &trace)
	if err != nil {
		t.Fatalf("simtest: %v", err)
	}
	if *flagTwice || len(out.Failures) > 0 && !show {
		var again bytes.Buffer
		twice, _ := play(t, cfg, scenario, seed, program, true, &again)
		if twice.Hash != out.Hash {
			t.Errorf("simtest: seed %d is not deterministic: two runs gave different traces (%016x, %016x); the program waits on something other than the node's clock, store and context", seed, out.Hash, twice.Hash)
		}
		if len(out.Failures) > 0 {
			trace = again
			out.SVG = twice.SVG
		}
	}
	if show {
		t.Log("trace:\n" + trace.String())
	}
	if len(out.Failures) == 0 {
		return out
	}
	faultsOf := "no faults but the script's"
	if scenario != "" {
		faultsOf = "the faults of " + scenario
	}
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d (%s) broke %d check(s):\n", seed, faultsOf, len(out.Failures))
	for i, f := range out.Failures {
		if i == shown {
			fmt.Fprintf(&b, "  ... and %d more (in the trace)\n", len(out.Failures)-shown)
			break
		}
		fmt.Fprintf(&b, "  - %s\n", f)
	}
	fmt.Fprintf(&b, "replay: go test -run '%s' -simtest.trace", runPattern(t.Name()))
	if dir, err := keep(t, seed, trace.Bytes(), out.SVG); err == nil {
		fmt.Fprintf(&b, "\ntrace and timeline: %s", dir)
	} else {
		fmt.Fprintf(&b, "\n(trace not kept: %v)", err)
	}
	t.Error(b.String())
	return out
}

// play runs one seed in a synctest bubble of its own.
func play(t *testing.T, cfg Config, scenario string, seed uint64, program func(*World, *Node), keep bool, trace *bytes.Buffer) (out userworld.Outcome, err error) {
	synctest.Test(t, func(t *testing.T) {
		w := &World{seed: seed}
		spec := userworld.Spec{
			Seed: seed, Nodes: cfg.Nodes, Lease: cfg.Lease, Scenario: scenario, Duration: cfg.Duration,
			Timing: cfg.Timing, Unfenced: cfg.Unfenced, Timeline: keep,
			Program: func(n userworld.Node) { program(w, &Node{n: n}) },
		}
		if keep {
			spec.Trace = trace
		}
		if cfg.Script != nil {
			spec.Script = func(uw userworld.World) {
				w.uw = uw
				cfg.Script(w)
			}
		}
		var uw userworld.World
		if uw, err = userworld.New(spec); err != nil {
			return
		}
		w.uw = uw
		out = uw.Run()
		if out.Leaked {
			// synctest panics once this function returns with goroutines
			// of the bubble left: say why first.
			t.Errorf("seed %d: the program leaves goroutines behind, and the test stops here (testing/synctest's panic follows):\n%s",
				seed, strings.Join(out.Failures, "\n"))
		}
		if cfg.Check != nil {
			h := &History{Seed: seed}
			for _, a := range out.Acts {
				h.Acts = append(h.Acts, actOf(a))
			}
			if err := cfg.Check(h); err != nil {
				out.Failures = append(out.Failures, "check: "+err.Error())
			}
		}
	})
	return out, err
}

// runPattern is the -run pattern of exactly the test called name.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// keep writes a failing seed's trace and timeline where they outlive the
// test, and returns the directory.
func keep(t *testing.T, seed uint64, trace []byte, svg func(io.Writer) error) (string, error) {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	dir := filepath.Join(os.TempDir(), "tenure-simtest", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "trace.txt"), trace, 0o644); err != nil {
		return "", err
	}
	if svg != nil {
		var b bytes.Buffer
		if err := svg(&b); err == nil {
			if err := os.WriteFile(filepath.Join(dir, "timeline.svg"), b.Bytes(), 0o644); err != nil {
				return "", err
			}
		}
	}
	return dir, nil
}

// World is one seed's world, as the program and the script see it. Its
// methods that inject faults are for Config.Script (and the functions it
// schedules with At); Effect, Write, Always and Sometimes are for the
// program.
type World struct {
	seed uint64
	uw   userworld.World
}

// Seed returns the seed the world was drawn from.
func (w *World) Seed() uint64 { return w.seed }

// Effect records a side effect that carries no token (an e-mail, a
// payment, a write to a store that cannot check one), made by node n now.
// It fails the seed if another process holds the lease n acts for at this
// instant of true time. It returns once the world took it: a pause armed
// for n's next act (PauseAtAct, or the scenarios' pauses between a check
// and a write) holds it first.
func (w *World) Effect(n *Node, what string) {
	_ = n.n.Act(userworld.Act{Kind: userworld.Effect, What: what})
}

// EffectContext is Effect made for the lease whose fence ctx carries (the
// context of a term, a lock or a shard): the seed fails if another process
// holds that lease now. Without a fence in ctx (context.Background()), it
// is Effect.
func (w *World) EffectContext(ctx context.Context, n *Node, what string) {
	f, ok := fencing.FromContext(ctx)
	_ = n.n.Act(userworld.Act{Kind: userworld.Effect, What: what, Fenced: ok, Fence: f})
}

// Write writes to the world's fenced resource, with the fence of ctx (the
// context of a term, a lock or a shard): it is refused, with
// fencing.ErrNoFence or a *fencing.StaleTokenError, if ctx carries none or
// a token below one the resource accepted for the same lease.
func (w *World) Write(ctx context.Context, n *Node, what string) error {
	f, ok := fencing.FromContext(ctx)
	return n.n.Act(userworld.Act{Kind: userworld.Write, What: what, Fenced: ok, Fence: f})
}

// Always fails the seed if cond is false.
func (w *World) Always(n *Node, cond bool, msg string) { n.n.Assert(true, cond, msg) }

// Sometimes fails Run if cond is false at every call, over all its seeds.
func (w *World) Sometimes(n *Node, cond bool, msg string) { n.n.Assert(false, cond, msg) }

// At runs f at true time d from the start of the run.
func (w *World) At(d time.Duration, f func()) { w.uw.At(d, f) }

// Now returns the true time since the start of the run.
func (w *World) Now() time.Duration { return w.uw.Now() }

// Nodes returns the nodes' names: "a", "b", and so on.
func (w *World) Nodes() []string { return w.uw.Nodes() }

// Leader returns the name of the node whose running process holds
// Config.Lease in the store now, or "" when none does.
func (w *World) Leader() string { return w.uw.Leader() }

// Pause stops node's process for d: nothing it waits for on the world (its
// clock, its store, its acts) reaches it meanwhile; its clock runs on.
func (w *World) Pause(node string, d time.Duration) { w.uw.Pause(node, d, false) }

// Suspend stops node's VM for d: as Pause, and its monotonic clock stands
// still, its wall clock is stepped forward on resume.
func (w *World) Suspend(node string, d time.Duration) { w.uw.Pause(node, d, true) }

// PauseAtAct pauses node's process for d right before its next act (Effect
// or Write): between the code's check of its term and what it does.
func (w *World) PauseAtAct(node string, d time.Duration) { w.uw.PauseAtAct(node, d) }

// Crash ends node's process at once: no release, its context done.
func (w *World) Crash(node string) { w.uw.Crash(node) }

// Restart starts a new process on node, if none runs: the program runs
// again, with the node's ID.
func (w *World) Restart(node string) { w.uw.Restart(node) }

// Partition cuts node off from the store for d.
func (w *World) Partition(node string, d time.Duration) { w.uw.Cut(node, d) }

// StepClock steps node's wall clock by d (NTP): its monotonic clock, by
// which tenure times leases, is not touched.
func (w *World) StepClock(node string, d time.Duration) { w.uw.StepWall(node, d) }

// LoseRecord deletes Config.Lease's record from the store, as a restored
// backup or a careless tool would.
func (w *World) LoseRecord() { w.uw.LoseRecord() }

// Node is one process of a node; a restarted node runs a new one.
type Node struct{ n userworld.Node }

// Name returns the node's name.
func (n *Node) Name() string { return n.n.Name() }

// Context is done when the process stops: at the end of the run (a clean
// shutdown) or when the node crashes.
func (n *Node) Context() context.Context { return n.n.Context() }

// Runtime returns what the program passes to tenure.Config (and
// LockerConfig, GroupConfig): the process's ID, its node's clock (skewed,
// drifting, stepped as the faults say), and its seeded randomness.
func (n *Node) Runtime() tenure.Runtime { return n.n.Runtime() }

// Clock is the node's clock for the program's own waits.
func (n *Node) Clock() tenure.Clock { return n.n.Clock() }

// Store is the world's store, reached over the node's simulated link.
func (n *Node) Store() lease.Store { return n.n.Store() }

// History is what a seed recorded, for Config.Check.
type History struct {
	Seed uint64
	Acts []Act // in order of true time
}

// ActKind says what an Act was.
type ActKind int

const (
	ActEffect  ActKind = iota + 1 // World.Effect
	ActWrite                      // World.Write, accepted
	ActRefused                    // World.Write, refused
)

// Act is one act of the program.
type Act struct {
	At    time.Duration // true time since the start
	Node  string
	ID    string // the process's ID (Runtime.ID)
	Kind  ActKind
	What  string
	Fence fencing.Fence // Write: the fence it carried; zero without one
	Err   string        // ActRefused: why
}

func actOf(a userworld.Act) Act {
	return Act{At: a.At, Node: a.Node, ID: a.ID, Kind: ActKind(a.Kind), What: a.What, Fence: a.Fence, Err: a.Err}
}
