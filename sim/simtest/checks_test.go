package simtest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure"
)

// one plays seed 1 of cfg (its first fault set) with program.
func one(t *testing.T, cfg Config, program func(*World, *Node)) (*bytes.Buffer, []string) {
	t.Helper()
	cfg, faults := cfg.resolved()
	var trace bytes.Buffer
	out, err := play(t, cfg, scenarioOf(faults, 1), 1, program, true, &trace)
	if err != nil {
		t.Fatal(err)
	}
	return &trace, out.Failures
}

// has reports whether one of failures contains every one of parts.
func has(failures []string, parts ...string) bool {
	return slices.ContainsFunc(failures, func(f string) bool {
		for _, p := range parts {
			if !strings.Contains(f, p) {
				return false
			}
		}
		return true
	})
}

// leader is a Candidate on "leader" whose term runs work.
func leader(n *Node, work func(ctx context.Context, term tenure.Term)) {
	c := must(tenure.New(tenure.Config{Lease: "leader", Store: n.Store(), Runtime: n.Runtime(),
		Callbacks: tenure.Callbacks{OnElected: work}}))
	_ = c.Run(n.Context())
}

func TestEffectOverlapNamesTheHolderAndTheFault(t *testing.T) {
	// The leader is cut off for a minute at 30s and keeps acting on a
	// variable it never clears: the one built-in check of effects fails,
	// naming the new holder and the cut-off.
	cfg := Config{Duration: 3 * time.Minute, Script: func(w *World) {
		w.At(30*time.Second, func() { w.Partition(w.Leader(), time.Minute) })
	}}
	_, failures := one(t, cfg, cachedLeader(false))
	if !has(failures, `acted ("tick") while`, "cut off from the store at 30s") {
		t.Fatalf("no overlap reported with its cause: %q", failures)
	}
	if _, failures := one(t, cfg, cachedLeader(true)); len(failures) > 0 {
		t.Fatalf("the fixed twin failed: %q", failures)
	}
}

func TestUnfencedResourceShowsWhatTheFenceRefuses(t *testing.T) {
	// The zombie's write is refused by the fence; with the resource
	// unfenced, it is accepted after a newer token, and the check fails.
	cfg := Config{Faults: []string{"gc-pause"}}
	if _, failures := one(t, cfg, leaderWriter(true)); len(failures) > 0 {
		t.Fatalf("fenced: %q", failures)
	}
	cfg.Unfenced = true
	_, failures := one(t, cfg, leaderWriter(true))
	if !has(failures, "the resource accepted", "after token") {
		t.Fatalf("unfenced: %q", failures)
	}
}

func TestWriteWithoutFenceIsRefused(t *testing.T) {
	var errs []error
	_, failures := one(t, Config{Nodes: 1, Duration: time.Minute}, func(w *World, n *Node) {
		leader(n, func(ctx context.Context, _ tenure.Term) {
			errs = append(errs, w.Write(context.Background(), n, "no token"), w.Write(ctx, n, "the term's token"))
			<-ctx.Done()
		})
	})
	if len(failures) > 0 || len(errs) != 2 || errs[0] == nil || errs[1] != nil {
		t.Fatalf("failures %q, errors %v: want the first write refused, the second accepted", failures, errs)
	}
}

func TestAlwaysAndCheck(t *testing.T) {
	cfg := Config{Nodes: 1, Duration: time.Minute, Check: func(h *History) error {
		if len(h.Acts) != 1 || h.Acts[0].What != "once" {
			return errors.New("want one act")
		}
		return errors.New("the check ran")
	}}
	_, failures := one(t, cfg, func(w *World, n *Node) {
		w.Effect(n, "once")
		w.Always(n, true, "holds")
		w.Always(n, false, "does not hold")
		<-n.Context().Done()
	})
	if !has(failures, "always: does not hold") || has(failures, "always: holds") || !has(failures, "check: the check ran") {
		t.Fatalf("failures: %q", failures)
	}
}

func TestSometimes(t *testing.T) {
	cfg, _ := Config{Nodes: 1, Duration: time.Minute}.resolved()
	some := map[string]bool{}
	for seed := range uint64(3) {
		out, err := play(t, cfg, "", seed, func(w *World, n *Node) {
			w.Sometimes(n, seed == 2, "seed 2")
			w.Sometimes(n, false, "never")
			<-n.Context().Done()
		}, false, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		for msg, held := range out.Sometimes {
			some[msg] = some[msg] || held
		}
	}
	if !some["seed 2"] || some["never"] || len(some) != 2 {
		t.Fatalf("sometimes: %v", some)
	}
}

// TestLeakedGoroutineIsReported runs the leaking program in a test binary
// of its own: testing/synctest panics once the run ends with goroutines
// left, and the world must say which, and why, before.
func TestLeakedGoroutineIsReported(t *testing.T) {
	if os.Getenv("SIMTEST_LEAK") != "" {
		Run(t, Config{Nodes: 1, Duration: time.Minute, Seeds: 1}, func(w *World, n *Node) {
			go func() { select {} }()
			<-n.Context().Done()
		})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeakedGoroutineIsReported$")
	cmd.Env = append(os.Environ(), "SIMTEST_LEAK=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !bytes.Contains(out, []byte("a goroutine outlives the run")) || !bytes.Contains(out, []byte("checks_test.go")) {
		t.Fatalf("exit %v, output:\n%s", err, out)
	}
}

func TestScriptedFaults(t *testing.T) {
	// Crash the leader, then restart it: the program runs again, and
	// another node leads meanwhile.
	var leaders []string
	cfg := Config{Duration: 2 * time.Minute, Script: func(w *World) {
		w.At(30*time.Second, func() {
			leaders = append(leaders, w.Leader())
			w.Crash(w.Leader())
		})
		w.At(60*time.Second, func() {
			leaders = append(leaders, w.Leader())
			w.Restart(leaders[0])
		})
	}}
	var mu sync.Mutex
	starts := map[string]int{}
	trace, failures := one(t, cfg, func(w *World, n *Node) {
		mu.Lock()
		starts[n.Name()]++
		mu.Unlock()
		leader(n, func(ctx context.Context, _ tenure.Term) { <-ctx.Done() })
	})
	if len(failures) > 0 || len(leaders) != 2 || leaders[0] == "" || leaders[1] == "" || leaders[0] == leaders[1] {
		t.Fatalf("failures %q, leaders %q", failures, leaders)
	}
	if starts[leaders[0]] != 2 || !strings.Contains(trace.String(), "crash") {
		t.Fatalf("starts %v: want two on %s", starts, leaders[0])
	}
}

func TestPauseAtActHoldsTheAct(t *testing.T) {
	// Armed at 20s, the pause holds the leader's next act for a minute:
	// the act lands as a zombie's.
	cfg := Config{Duration: 3 * time.Minute, Script: func(w *World) {
		w.At(20*time.Second, func() { w.PauseAtAct(w.Leader(), time.Minute) })
	}}
	var mu sync.Mutex
	var at []time.Duration
	_, failures := one(t, cfg, func(w *World, n *Node) {
		leader(n, func(ctx context.Context, _ tenure.Term) {
			for {
				select {
				case <-ctx.Done():
					return
				case <-n.Clock().After(5 * time.Second):
				}
				w.Effect(n, "work")
				mu.Lock()
				at = append(at, w.Now())
				mu.Unlock()
			}
		})
	})
	if !has(failures, `acted ("work") while`, "pause the process for 1m0s") {
		t.Fatalf("failures %q, acts at %v", failures, at)
	}
}

func TestDeterministic(t *testing.T) {
	cfg, faults := Config{Faults: []string{"leader-cut-off"}}.resolved()
	var a, b bytes.Buffer
	outA, _ := play(t, cfg, scenarioOf(faults, 7), 7, programs[3].fixed, true, &a)
	outB, _ := play(t, cfg, scenarioOf(faults, 7), 7, programs[3].fixed, true, &b)
	if outA.Hash != outB.Hash || !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatalf("seed 7 gave two traces (%016x, %016x)", outA.Hash, outB.Hash)
	}
}

func TestRunPattern(t *testing.T) {
	if got, want := runPattern("TestJob/seed=4711"), "^TestJob$/^seed=4711$"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Faults: []string{"no-such"}},
		{Faults: []string{"wake-handoff"}}, // the simulator's own standby
		{Nodes: 7, Faults: []string{"gc-pause"}},
		{Lease: "a\x00b"},
	} {
		c, faults := cfg.resolved()
		if _, err := play(t, c, scenarioOf(faults, 0), 0, func(*World, *Node) {}, false, &bytes.Buffer{}); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}

func TestSemaphoreHoldersAreHeldToTheirSlots(t *testing.T) {
	// Four nodes share a semaphore of two: each holder's effects are made
	// for its slot (EffectContext), and a holder that works past its
	// lock's context acts while another holds its slot.
	cfg := Config{Nodes: 4, Lease: "job", Faults: noZombies, Seeds: 20}
	cfg, faults := cfg.resolved()
	failed := 0
	for seed := range uint64(20) {
		out, err := play(t, cfg, scenarioOf(faults, seed), seed, lockWorker(true, tenure.Slots(2)), false, &bytes.Buffer{})
		if err != nil || len(out.Failures) > 0 {
			t.Fatalf("seed %d, fixed: %v %q", seed, err, out.Failures)
		}
		out, _ = play(t, cfg, scenarioOf(faults, seed), seed, lockWorker(false, tenure.Slots(2)), false, &bytes.Buffer{})
		if has(out.Failures, "::slot.") {
			failed++
		}
	}
	if failed == 0 {
		t.Fatal("no seed of the buggy holder failed")
	}
}
