package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/tenure-go/tenure/sim"
)

const simUsage = `usage: tenure sim [flags]

Runs the fast tier of the deterministic simulator (tenure's production
entries and host core, stepped by the simulator on one goroutine) over
named fault scenarios and checks invariants I1 to I8 at every event. The
same seed always replays the same run. The real tier (tenure.Candidate,
Locker and Group under testing/synctest) runs under go test ./sim.

exit status: 0 when every run kept the invariants its scenario promises; 1
when one did not (each such seed is printed with the command that replays
it); 2 for bad flags.

examples:
  tenure sim -scenario all -seeds 200                 # every scenario, 200 seeds each
  tenure sim -scenario gc-pause,swarm -seeds 1000     # some scenarios
  tenure sim -scenario gc-pause -seed 7 -trace        # one run, event by event
  tenure sim -scenario gc-pause -svg run.svg          # its timeline
  tenure sim -strategy naive                          # the baseline that fails

flags:
`

// simCommand implements "tenure sim".
func simCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tenure sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, simUsage)
		fs.PrintDefaults()
		fmt.Fprintln(stderr, "\nscenarios:")
		for _, sc := range sim.Scenarios() {
			fmt.Fprintf(stderr, "  %-24s %s\n", sc.Name, sc.Summary)
		}
	}
	var (
		scenario = fs.String("scenario", "all", "scenario to run, several separated by commas, or all")
		seeds    = fs.Int("seeds", 1, "number of seeds per scenario")
		seed     = fs.Uint64("seed", 1, "first seed: -seed S -seeds N runs seeds S to S+N-1")
		strategy = fs.String("strategy", "tenure", "election logic: tenure, or naive (expiry judged by wall-clock timestamps in the record)")
		resource = fs.String("resource", "fenced", "the leaders' resource: fenced (fencing.Guard) or unfenced")
		trace    = fs.Bool("trace", false, "print the event trace of every run (the summary then goes to stderr)")
		svg      = fs.String("svg", "", "write a timeline of the run to this SVG file (one run only)")
		workers  = fs.Int("workers", runtime.GOMAXPROCS(0), "runs in parallel")
		cpuprof  = fs.String("cpuprofile", "", "write a CPU profile of the runs to this file (cmd/tenure/default.pgo is one)")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tenure sim: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	var opt sim.Options
	switch *strategy {
	case "tenure":
	case "naive":
		opt.Strategy = sim.Naive
	default:
		fmt.Fprintf(stderr, "tenure sim: -strategy %q: want tenure or naive\n", *strategy)
		return 2
	}
	switch *resource {
	case "fenced":
	case "unfenced":
		opt.Resource = sim.Unfenced
	default:
		fmt.Fprintf(stderr, "tenure sim: -resource %q: want fenced or unfenced\n", *resource)
		return 2
	}
	var scs []*sim.Scenario
	if *scenario == "all" {
		scs = sim.Scenarios()
	} else {
		for _, name := range strings.Split(*scenario, ",") {
			sc := sim.Lookup(strings.TrimSpace(name))
			if sc == nil {
				fmt.Fprintf(stderr, "tenure sim: no scenario %q (tenure sim -h lists them)\n", name)
				return 2
			}
			if !slices.Contains(scs, sc) {
				scs = append(scs, sc)
			}
		}
	}
	if *seeds < 1 || *workers < 1 {
		fmt.Fprintln(stderr, "tenure sim: -seeds and -workers must be at least 1")
		return 2
	}
	if *svg != "" && (len(scs) != 1 || *seeds != 1) {
		fmt.Fprintln(stderr, "tenure sim: -svg draws one run: give -scenario NAME and one seed")
		return 2
	}
	opt.Timeline = *svg != ""

	// A run's live heap is small and short-lived, so the collector at its
	// default pace runs all the time (half the time of -scenario all at
	// two workers): let the heap grow twentyfold between collections,
	// unless GOGC says otherwise. The memory limit keeps that bounded.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(2000)
		if os.Getenv("GOMEMLIMIT") == "" {
			debug.SetMemoryLimit(1 << 30)
		}
	}

	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			fmt.Fprintf(stderr, "tenure sim: %s\n", bare(err))
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "tenure sim: %s\n", bare(err))
			return 2
		}
		defer pprof.StopCPUProfile()
	}

	// Run every (scenario, seed) on a pool of workers. Results are summed
	// as they come, and only failures (and, for -trace or -svg, every run)
	// are kept: a million seeds take no more memory than a hundred. Each
	// worker takes the next run from a counter and keeps its own tally,
	// merged once all are done: nothing passes between goroutines per run.
	type job struct {
		i     int
		sc    *sim.Scenario
		seed  uint64
		res   *sim.Result
		trace bytes.Buffer
	}
	keep := *trace || *svg != ""
	n := len(scs) * *seeds
	nw := min(*workers, n)
	start := time.Now()

	// The summary: per scenario, runs that broke each invariant.
	type row struct {
		runs          int
		broke, unprom [sim.Preference + 1]int
		simTime, wall time.Duration
	}
	type tally struct {
		rows         []row // per scenario, as scs
		failed, kept []*job
	}
	tallies := make([]tally, nw)
	var taken atomic.Int64
	var wg sync.WaitGroup
	for w := range nw {
		t := &tallies[w]
		t.rows = make([]row, len(scs))
		wg.Go(func() {
			for {
				i := int(taken.Add(1) - 1)
				if i >= n {
					return
				}
				k := i / *seeds
				j := &job{i: i, sc: scs[k], seed: *seed + uint64(i%*seeds)}
				o := opt
				if *trace {
					o.Trace = &j.trace
				}
				j.res = sim.Run(j.sc, j.seed, o)
				r := &t.rows[k]
				r.runs++
				r.simTime += j.res.SimTime
				r.wall += j.res.Wall
				for i := sim.OneLeader; i <= sim.Preference; i++ {
					if j.res.Counts[i] == 0 {
						continue
					}
					if j.res.Requires.Has(i) {
						r.broke[i]++
					} else {
						r.unprom[i]++
					}
				}
				if j.res.Failed() {
					t.failed = append(t.failed, j)
				}
				if keep {
					t.kept = append(t.kept, j)
				}
			}
		})
	}
	wg.Wait()
	rows := make([]row, len(scs))
	var failed, kept []*job
	var total row
	for _, t := range tallies {
		for k, r := range t.rows {
			for _, x := range []*row{&rows[k], &total} {
				x.runs += r.runs
				x.simTime += r.simTime
				x.wall += r.wall
				for i := range x.broke {
					x.broke[i] += r.broke[i]
					x.unprom[i] += r.unprom[i]
				}
			}
		}
		failed = append(failed, t.failed...)
		kept = append(kept, t.kept...)
	}
	elapsed := time.Since(start)
	slices.SortFunc(failed, func(a, b *job) int { return a.i - b.i })
	slices.SortFunc(kept, func(a, b *job) int { return a.i - b.i })

	if *trace {
		for _, j := range kept {
			if n > 1 {
				fmt.Fprintf(stdout, "== %s seed %d\n", j.sc.Name, j.seed)
			}
			_, _ = stdout.Write(j.trace.Bytes())
		}
		// The trace alone on stdout replays byte for byte; the summary,
		// with its wall times, goes aside.
		stdout = stderr
	}
	if *svg != "" {
		if err := writeSVG(*svg, kept[0].res); err != nil {
			fmt.Fprintf(stderr, "tenure sim: %s\n", bare(err))
			return 1
		}
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\truns\tI1\tI2\tI3\tI4\tI5\tI6\tI7\tI8\tsimulated\twall\t")
	line := func(name string, r *row) {
		fmt.Fprintf(tw, "%s\t%d\t", name, r.runs)
		for i := sim.OneLeader; i <= sim.Preference; i++ {
			fmt.Fprintf(tw, "%s\t", cell(r.broke[i], r.unprom[i]))
		}
		fmt.Fprintf(tw, "%s\t%s\t\n", fmtSim(r.simTime), r.wall.Round(time.Millisecond))
	}
	for k, sc := range scs {
		line(sc.Name, &rows[k])
	}
	if len(scs) > 1 {
		line("total", &total)
	}
	_ = tw.Flush()
	fmt.Fprintf(stdout, "\n%v, %v resource: %d runs, %s simulated in %v (%.0f simulated seconds per second on %d workers)\n",
		opt.Strategy, opt.Resource, total.runs, fmtSim(total.simTime), elapsed.Round(time.Millisecond),
		total.simTime.Seconds()/elapsed.Seconds(), nw)
	fmt.Fprintln(stdout, "Columns count runs that broke an invariant the scenario promises; (n) counts runs that broke one it")
	fmt.Fprintln(stdout, "does not promise (I1 under process pauses, for one), shown to prove the checker sees them.")
	if len(failed) == 0 {
		return 0
	}
	var names []string
	for _, j := range failed {
		if len(names) == 0 || names[len(names)-1] != j.sc.Name {
			names = append(names, j.sc.Name)
		}
	}
	fmt.Fprintf(stdout, "\nFAIL: %d runs broke promised invariants, in %s\n", len(failed), strings.Join(names, ", "))
	for _, j := range failed {
		v := j.res.Failures()[0]
		fmt.Fprintf(stdout, "%s seed %d: %v\n    replay: %s\n", j.sc.Name, j.seed, v, replay(j.sc.Name, j.seed, opt))
	}
	return 1
}

func cell(broke, unpromised int) string {
	switch {
	case unpromised == 0:
		return fmt.Sprint(broke)
	case broke == 0:
		return fmt.Sprintf("(%d)", unpromised)
	}
	return fmt.Sprintf("%d (%d)", broke, unpromised)
}

// fmtSim formats simulated time in hours and minutes: runs add up to days.
func fmtSim(d time.Duration) string {
	h := int64(d / time.Hour)
	m := int64(d % time.Hour / time.Minute)
	s := int64(d % time.Minute / time.Second)
	if h > 0 {
		return fmt.Sprintf("%dh%02dm%02ds", h, m, s)
	}
	return fmt.Sprintf("%dm%02ds", m, s)
}

func replay(name string, seed uint64, opt sim.Options) string {
	cmd := fmt.Sprintf("go run ./cmd/tenure sim -scenario %s -seed %d", name, seed)
	if opt.Strategy != sim.Tenure {
		cmd += " -strategy " + opt.Strategy.String()
	}
	if opt.Resource != sim.Fenced {
		cmd += " -resource " + opt.Resource.String()
	}
	return cmd + " -trace"
}

func writeSVG(path string, r *sim.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := r.WriteSVG(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
