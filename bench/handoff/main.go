//go:build unix

// Command handoff measures tenure with real candidate processes against a
// real store: failover after a crash (kill -9), handoff after a graceful
// stop (SIGTERM), how soon a paused leader (SIGSTOP, then SIGCONT) knows it
// no longer leads, the store requests per hour of 2 to 20 candidates, and
// their idle CPU and goroutines. docs/performance.md explains the method.
//
//	scripts/testservers.sh run -- go run ./bench/handoff                 # DynamoDB Local
//	go run ./bench/handoff -store 'dynamodb://leases?region=eu-west-1'   # any store URL
//	go run ./bench/handoff -trials 5 -window 10s                        # a quick run
//	scripts/testservers.sh run -- go run ./bench/handoff -wake          # a standby, woken on release
//	scripts/testservers.sh run -- go run ./bench/handoff -kube -systems tenure-wake,tenure-plain,client-go
//	scripts/testservers.sh run -- go run ./bench/handoff -systems tenure-wake,dynamolock
//
// With -kube it runs on the kube-apiserver (a namespace of its own, deleted
// after), and -systems client-go adds client-go's leaderelection
// (ReleaseOnCancel), trial by trial with tenure's; every candidate's API
// requests are counted the same way, at its HTTP transport. On DynamoDB,
// -systems dynamolock adds cirello.io/dynamolock, its calls counted at its
// HTTP client. A paused
// leader's stale answers (the term's context or Status for tenure,
// IsLeader for client-go) are counted once it resumes.
//
// Without -store it uses DynamoDB Local at $TENURE_DYNAMODB_ENDPOINT (a new
// table per run), else a file store in a temporary directory. Each
// candidate is this program again, in -role candidate, printing what
// happens to it, with the time, on stdout.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/tenure-go/tenure/internal/plan"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/benchkit"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/k8slease"
	"github.com/tenure-go/tenure/lease/storeurl"
)

func main() {
	var (
		role     = flag.String("role", "bench", "bench, or candidate (internal)")
		storeURL = flag.String("store", "", "store URL (default: DynamoDB Local at $TENURE_DYNAMODB_ENDPOINT, else a file store)")
		leaseDur = flag.Duration("lease", 3*time.Second, "lease duration (L)")
		renew    = flag.Duration("renew", time.Second, "renewal interval")
		poll     = flag.Duration("poll", time.Second, "poll interval")
		trials   = flag.Int("trials", 20, "trials of each kind (0: count the requests only)")
		window   = flag.Duration("window", 30*time.Second, "how long to count requests, per number of candidates")
		counts   = flag.String("candidates", "2,3,5,10,20", "numbers of candidates for the request counts")
		standby  = flag.Bool("standby", false, "candidates run with Config.Standby")
		coldPoll = flag.Duration("cold-poll", 0, "with -standby: ColdPollInterval (default 10 × poll)")
		wake     = flag.Bool("wake", false, "candidates listen for wake-ups on 127.0.0.1 (turns on -standby)")
		kube     = flag.Bool("kube", false, "on the kube-apiserver at $TENURE_KUBE_URL, a namespace of its own (lease/k8slease)")
		systems  = flag.String("systems", "tenure", "the systems compared, trial by trial: tenure (as -standby and -wake say), tenure-wake (standby and wake-ups), tenure-plain, client-go (leaderelection, ReleaseOnCancel; needs -kube), dynamolock (cirello.io/dynamolock on DynamoDB: AcquireLock retried every poll, heartbeats every renewal)")
		cgRenew  = flag.Duration("cg-renew-deadline", 0, "client-go's RenewDeadline (default 2/3 L: 10s at L = 15s)")
		crashAt  = flag.Duration("crash-after", 0, "crash the leader this long after its election, plus up to a renewal interval at random (default: at a random moment of a poll once it sends renewal notices)")
		cgRetry  = flag.Duration("cg-retry", 0, "client-go's RetryPeriod (default 2/15 L: 2s at L = 15s)")
		system   = flag.String("system", "", "candidate: tenure, client-go or dynamolock")
		name     = flag.String("name", "", "candidate: lease name")
		id       = flag.String("id", "", "candidate: ID")
	)
	flag.Parse()
	t := election.Timing{LeaseDuration: *leaseDur, RenewInterval: *renew, PollInterval: *poll, ColdPollInterval: *coldPoll}
	if (*standby || *wake) && t.ColdPollInterval == 0 {
		t.ColdPollInterval = 10 * t.PollInterval
	}
	wakeFlag, crashAfter = *wake, *crashAt
	cg := cgTiming{*leaseDur, *cgRenew, *cgRetry}
	if cg.renewDeadline == 0 {
		cg.renewDeadline = *leaseDur * 2 / 3
	}
	if cg.retry == 0 {
		cg.retry = *leaseDur * 2 / 15
	}
	if *role == "candidate" && *system == "client-go" {
		if err := clientgoCandidate(*storeURL, *name, *id, cg); err != nil {
			fmt.Fprintln(os.Stderr, "client-go candidate:", err)
			os.Exit(1)
		}
		return
	}
	if *role == "candidate" && *system == "dynamolock" {
		if err := dynamolockCandidate(*storeURL, *name, *id, t); err != nil {
			fmt.Fprintln(os.Stderr, "dynamolock candidate:", err)
			os.Exit(1)
		}
		return
	}
	if *role == "candidate" {
		if err := candidate(*storeURL, *name, *id, t); err != nil {
			fmt.Fprintln(os.Stderr, "candidate:", err)
			os.Exit(1)
		}
		return
	}
	sys, err := parseSystems(*systems, *kube, t)
	if err != nil {
		fmt.Fprintln(os.Stderr, "handoff:", err)
		os.Exit(2)
	}
	if *kube {
		if *storeURL != "" {
			fmt.Fprintln(os.Stderr, "handoff: -kube or -store, not both")
			os.Exit(2)
		}
		url, done, err := benchkit.KubeStoreURL()
		if err != nil {
			fmt.Fprintln(os.Stderr, "handoff:", err)
			os.Exit(1)
		}
		cleanup = done
		*storeURL = url
	}
	cgArgs = []string{"-cg-renew-deadline", cg.renewDeadline.String(), "-cg-retry", cg.retry.String()}
	if slices.ContainsFunc(sys, func(s sysSpec) bool { return s.name == "client-go" }) {
		fmt.Printf("client-go: LeaseDuration %v, RenewDeadline %v, RetryPeriod %v, ReleaseOnCancel\n", cg.lease, cg.renewDeadline, cg.retry)
	}
	// The plan of a store with a change feed (tenure plan's): how often
	// its server ends a watch.
	switch {
	case strings.HasPrefix(*storeURL, "k8s:"):
		feedRestarts = 60.0 / 45
	case strings.HasPrefix(*storeURL, "etcd:"), strings.HasPrefix(*storeURL, "postgres"):
		feedRestarts = 0
	}
	if err := bench(*storeURL, sys, t, *trials, *window, *counts); err != nil {
		fmt.Fprintln(os.Stderr, "handoff:", err)
		cleanup()
		os.Exit(1)
	}
	cleanup()
}

// cleanup deletes what the bench made on the API server (-kube).
var cleanup = func() {}

// crashAfter is -crash-after.
var crashAfter time.Duration

// cgArgs are the client-go timings, for its candidate processes.
var cgArgs []string

// sysSpec is one system compared: tenure with its timing and wake-ups,
// or client-go.
type sysSpec struct {
	name string
	t    election.Timing
	wake bool
}

func (s sysSpec) tenure() bool { return strings.HasPrefix(s.name, "tenure") }

// parseSystems reads -systems.
func parseSystems(list string, kube bool, t election.Timing) ([]sysSpec, error) {
	var out []sysSpec
	for _, n := range strings.Split(list, ",") {
		s := sysSpec{name: strings.TrimSpace(n), t: t}
		switch s.name {
		case "tenure":
			s.wake = wakeFlag
		case "tenure-plain":
			s.t.ColdPollInterval = 0
		case "tenure-wake":
			s.wake = true
			if s.t.ColdPollInterval == 0 {
				s.t.ColdPollInterval = 10 * s.t.PollInterval
			}
		case "client-go":
			if !kube {
				return nil, errors.New("-systems client-go needs -kube")
			}
		case "dynamolock":
			if kube {
				return nil, errors.New("-systems dynamolock needs DynamoDB, not -kube")
			}
		default:
			return nil, fmt.Errorf("-systems: unknown %q", s.name)
		}
		out = append(out, s)
	}
	return out, nil
}

// wakeFlag: candidates listen for wake-ups (-wake).
var wakeFlag bool

// candidate runs one Candidate and reports on stdout: "NS elected TOKEN",
// "NS demoted REASON", "NS standby true|false" (with a standby), and on
// SIGUSR1 "NS stats GETS PUTS GOROUTINES CPU_NS".
func candidate(storeURL, name, id string, t election.Timing) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var s lease.Store
	var err error
	var count benchkit.HTTPCount // on Kubernetes: API requests, as client-go's are counted
	kube := strings.HasPrefix(storeURL, "k8s:")
	if kube {
		ns, cs, err := count.Client(storeURL)
		if err != nil {
			return err
		}
		if s, err = k8slease.New(cs.CoordinationV1(), k8slease.Config{Namespace: ns}); err != nil {
			return err
		}
	} else if s, err = storeurl.Open(ctx, storeURL); err != nil {
		return err
	}
	wrapped, store := benchkit.Count(s)
	var term atomic.Pointer[context.Context] // the term's, while one runs
	say := func(format string, args ...any) {
		fmt.Printf("%d %s\n", time.Now().UnixNano(), fmt.Sprintf(format, args...))
	}
	wakeAddr := ""
	if wakeFlag {
		wakeAddr = "127.0.0.1:0"
	}
	c, err := tenure.New(tenure.Config{
		Lease: name, Store: wrapped, Timing: t, Standby: t.ColdPollInterval > 0,
		Runtime: tenure.Runtime{
			ID: id, WakeAddr: wakeAddr,
			Logger: slog.New(standbyLog{say}), // Status has no callback for the standby: its log says it
		},
		Callbacks: tenure.Callbacks{
			OnElected: func(ctx context.Context, t tenure.Term) {
				term.Store(&ctx)
				say("elected %d", t.Token)
				<-ctx.Done()
				say("over %d", t.Token) // the term's context ended: the first "no"
			},
			OnDemoted: func(term tenure.Term, r tenure.DemotionReason) {
				say("demoted %s", strings.ReplaceAll(r.String(), " ", "_"))
			},
		},
	})
	if err != nil {
		return err
	}
	onStats(say, func() (int64, int64) {
		if kube {
			return count.Gets.Load(), count.Puts.Load()
		}
		return store.Gets.Load(), store.Puts.Load()
	})
	// A stale answer: the term's context, or Status, says it leads.
	go probe(ctx, func() bool {
		if tc := term.Load(); tc != nil && (*tc).Err() == nil {
			return true
		}
		return c.Status().Leading
	}, say)
	say("started")
	err = c.Run(ctx)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// standbyLog reports the candidate's standby changes, which only its log
// tells, as "standby true" and "standby false", and "notifying" once a
// leader knows where to send renewal notices.
type standbyLog struct{ say func(string, ...any) }

func (h standbyLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelDebug }
func (h standbyLog) Handle(_ context.Context, r slog.Record) error {
	switch {
	case strings.HasPrefix(r.Message, "standby: reading the lease every"):
		h.say("standby true")
	case strings.HasPrefix(r.Message, "standby no more"):
		h.say("standby false")
	case strings.HasPrefix(r.Message, "standby: sending renewal notices"):
		h.say("notifying")
	}
	return nil
}
func (h standbyLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h standbyLog) WithGroup(string) slog.Handler      { return h }

// proc is a candidate process.
type proc struct {
	id        string
	cmd       *exec.Cmd
	leading   bool      // its latest news: elected, and not yet over
	electedAt time.Time // when it said so
	standby   bool
	notifying bool // a leader that sends the standby renewal notices
	exited    bool
}

type event struct {
	at   time.Time
	what string
	args []string
}

type msg struct {
	p *proc
	e event
}

// group runs candidates for one lease; their events arrive in one channel
// that only the coordinator reads.
type group struct {
	sys   sysSpec
	procs []*proc
	ch    chan msg
}

func newGroup(self, storeURL, name string, n int, sys sysSpec) (*group, error) {
	g := &group{sys: sys, ch: make(chan msg, 4096)}
	for i := range n {
		if err := g.start(self, storeURL, name, fmt.Sprintf("c%d", i), sys.t); err != nil {
			g.stop()
			return nil, err
		}
	}
	for range n {
		if _, _, err := g.wait(30*time.Second, func(_ *proc, e event) bool { return e.what == "started" }); err != nil {
			g.stop()
			return nil, err
		}
	}
	return g, nil
}

func (g *group) start(self, storeURL, name, id string, t election.Timing) error {
	cmd := exec.Command(self, "-role", "candidate", "-store", storeURL, "-name", name, "-id", id,
		"-lease", t.LeaseDuration.String(), "-renew", t.RenewInterval.String(), "-poll", t.PollInterval.String(),
		"-cold-poll", t.ColdPollInterval.String(), "-wake="+strconv.FormatBool(g.sys.wake), "-system", g.sys.name)
	cmd.Args = append(cmd.Args, cgArgs...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	p := &proc{id: id, cmd: cmd}
	g.procs = append(g.procs, p)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 2 {
				continue
			}
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			g.ch <- msg{p, event{at: time.Unix(0, ns), what: f[1], args: f[2:]}}
		}
		g.ch <- msg{p, event{at: time.Now(), what: "exit"}}
	}()
	return nil
}

// wait returns the first event that pred accepts, within d, keeping track
// of who leads meanwhile.
func (g *group) wait(d time.Duration, pred func(*proc, event) bool) (*proc, event, error) {
	timeout := time.After(d)
	for {
		select {
		case m := <-g.ch:
			switch m.e.what {
			case "elected":
				m.p.leading, m.p.electedAt = true, m.e.at
			case "over", "demoted":
				m.p.leading, m.p.notifying = false, false
			case "exit":
				m.p.leading, m.p.exited, m.p.standby, m.p.notifying = false, true, false, false
			case "notifying":
				m.p.notifying = true
			case "standby":
				m.p.standby = len(m.e.args) > 0 && m.e.args[0] == "true"
			}
			if pred(m.p, m.e) {
				return m.p, m.e, nil
			}
		case <-timeout:
			return nil, event{}, fmt.Errorf("nothing awaited within %v", d)
		}
	}
}

func elected(p *proc, e event) bool { return e.what == "elected" }

// leader returns the process that leads, waiting for an election if none
// does yet (one may have come while waiting for something else).
func (g *group) leader(d time.Duration) (*proc, error) {
	for _, p := range g.procs {
		if p.leading {
			return p, nil
		}
	}
	p, _, err := g.wait(d, elected)
	return p, err
}

// standbyReady waits, with a standby, until a live follower other than
// skip is the standby: the handoff measured is then the one a standby
// makes (after a takeover, the next standby is a cold follower that finds
// the record free within a cold poll).
func (g *group) standbyReady(t election.Timing, d time.Duration, skip ...*proc) error {
	if t.ColdPollInterval == 0 {
		return nil
	}
	for _, p := range g.procs {
		if p.standby && !p.exited && !slices.Contains(skip, p) {
			return nil
		}
	}
	_, _, err := g.wait(d, func(p *proc, e event) bool { return p.standby && !slices.Contains(skip, p) })
	return err
}

func electedOtherThan(skip ...*proc) func(*proc, event) bool {
	return func(p *proc, e event) bool { return e.what == "elected" && !slices.Contains(skip, p) }
}

func (g *group) stop() {
	for _, p := range g.procs {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range g.procs {
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
	}
}

func bench(storeURL string, systems []sysSpec, t election.Timing, trials int, window time.Duration, counts string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	storeURL, done, err := benchkit.StoreURL(storeURL)
	if err != nil {
		return err
	}
	defer done()
	if _, err := plan.New(t, 3, 0); err != nil {
		return err
	}
	fmt.Printf("store %s\nlease L = %v, renew %v, poll %v; %d trials each\n", storeURL, t.LeaseDuration, t.RenewInterval, t.PollInterval, trials)
	for _, s := range systems {
		if s.tenure() && s.t.ColdPollInterval > 0 {
			fmt.Printf("%s: standby, cold poll %v; wake-ups %t\n", s.name, s.t.ColdPollInterval, s.wake)
		}
	}
	fmt.Println()
	L := t.LeaseDuration
	long := 3*L + 10*time.Second

	crash := make([][]time.Duration, len(systems))
	handoff := make([][]time.Duration, len(systems))
	for i := range trials {
		for k, sys := range systems { // interleaved: trial i of each, in turn
			g, err := newGroup(self, storeURL, fmt.Sprintf("bench/%d/%d", time.Now().UnixNano(), i), 3, sys)
			if err != nil {
				return err
			}
			c, h, err := crashThenHandoff(g, long, crashAfter)
			g.stop()
			if err != nil {
				return fmt.Errorf("%s trial %d: %w", sys.name, i+1, err)
			}
			crash[k], handoff[k] = append(crash[k], c), append(handoff[k], h)
			fmt.Printf("%-12s trial %2d: crash failover %v (%.2f L), graceful handoff %v\n", sys.name, i+1, c.Round(time.Millisecond), ratio(c, L), h.Round(time.Millisecond))
		}
	}
	zombie := make([][]time.Duration, len(systems))
	stale := make([][]int, len(systems))
	for i := range (trials + 3) / 4 { // -trials 0: the requests only
		for k, sys := range systems {
			d, n, err := zombieTrial(self, storeURL, sys, i, long)
			if err != nil {
				return fmt.Errorf("%s zombie %d: %w", sys.name, i+1, err)
			}
			zombie[k], stale[k] = append(zombie[k], d), append(stale[k], n)
			fmt.Printf("%-12s zombie %2d: paused 2.5 L; after SIGCONT %d stale \"leading\" answers, over %v later\n", sys.name, i+1, n, d.Round(time.Microsecond))
		}
	}
	for k, sys := range systems {
		if trials == 0 {
			break
		}
		fmt.Printf("\n%s:\n", sys.name)
		summary("crash failover ÷ L", crash[k], func(d time.Duration) string { return fmt.Sprintf("%.2f", ratio(d, L)) })
		summary("graceful handoff", handoff[k], func(d time.Duration) string { return d.Round(time.Millisecond).String() })
		summary("zombie's first \"no\"", zombie[k], func(d time.Duration) string { return d.Round(time.Microsecond).String() })
		fmt.Printf("%-22s %d in all, %d trials with any\n", "stale answers", sum(stale[k]), count(stale[k]))
	}
	fmt.Println()
	return requests(self, storeURL, systems, window, counts)
}

func sum(ns []int) (s int) {
	for _, n := range ns {
		s += n
	}
	return s
}

func count(ns []int) (c int) {
	for _, n := range ns {
		if n > 0 {
			c++
		}
	}
	return c
}

// crashThenHandoff kills the leader (-9) at a random moment of a poll
// interval and times the next election; then stops the new leader with
// SIGTERM and times the next. With wake-ups, the crash comes once the
// leader sends the standby renewal notices, as in a steady state. With
// after > 0, it comes after plus up to a renewal interval after the
// leader's election, whatever it sends.
func crashThenHandoff(g *group, long, after time.Duration) (crash, handoff time.Duration, err error) {
	t := g.sys.t
	l, err := g.leader(long)
	if err != nil {
		return 0, 0, err
	}
	if after > 0 {
		at := l.electedAt.Add(after + rand.N(t.RenewInterval))
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		} else {
			return 0, 0, fmt.Errorf("the leader was elected %v ago, more than -crash-after", time.Since(l.electedAt))
		}
	} else if g.sys.wake && !l.notifying {
		if _, _, err := g.wait(long, func(p *proc, e event) bool { return p == l && e.what == "notifying" }); err != nil {
			return 0, 0, fmt.Errorf("the leader sent no renewal notices: %w", err)
		}
	}
	if after == 0 {
		time.Sleep(t.PollInterval + jitter(t.PollInterval)) // followers have polled
	}
	t0 := time.Now()
	_ = l.cmd.Process.Kill()
	l2, e, err := g.wait(long, electedOtherThan(l))
	if err != nil {
		return 0, 0, err
	}
	crash = e.at.Sub(t0)
	time.Sleep(t.PollInterval + jitter(t.PollInterval))
	if g.sys.tenure() {
		if err := g.standbyReady(t, long, l, l2); err != nil {
			return 0, 0, err
		}
	}
	t0 = time.Now()
	_ = l2.cmd.Process.Signal(syscall.SIGTERM)
	_, e, err = g.wait(long, electedOtherThan(l, l2))
	if err != nil {
		return 0, 0, err
	}
	return crash, e.at.Sub(t0), nil
}

// zombieTrial pauses a leader (SIGSTOP) for 2.5 L, during which another
// is elected, resumes it, and returns how long after SIGCONT it said its
// term was over, and how many times it answered that it still led.
func zombieTrial(self, storeURL string, sys sysSpec, i int, long time.Duration) (time.Duration, int, error) {
	g, err := newGroup(self, storeURL, fmt.Sprintf("bench/zombie/%d/%d", time.Now().UnixNano(), i), 2, sys)
	if err != nil {
		return 0, 0, err
	}
	defer g.stop()
	l, err := g.leader(long)
	if err != nil {
		return 0, 0, err
	}
	paused := time.Now()
	_ = l.cmd.Process.Signal(syscall.SIGSTOP)
	if _, _, err := g.wait(long, electedOtherThan(l)); err != nil {
		return 0, 0, err
	}
	time.Sleep(time.Until(paused.Add(sys.t.LeaseDuration * 5 / 2)))
	t0 := time.Now()
	_ = l.cmd.Process.Signal(syscall.SIGCONT)
	var over time.Duration
	stale := -1
	for over == 0 || stale < 0 {
		_, e, err := g.wait(15*time.Second, func(p *proc, e event) bool { return p == l && (e.what == "over" || e.what == "stale") })
		if err != nil {
			return 0, 0, err
		}
		if e.what == "over" {
			over = max(e.at.Sub(t0), time.Nanosecond)
		} else {
			stale, _ = strconv.Atoi(e.args[0])
		}
	}
	return over, stale, nil
}

// requests runs n idle candidates of each system for window, for each n,
// and reports their store requests per hour (against the plan's, for
// tenure), with idle CPU and goroutines.
func requests(self, storeURL string, systems []sysSpec, window time.Duration, counts string) error {
	fmt.Printf("requests per hour over %v (plan: tenure plan), idle CPU and goroutines per candidate:\n", window)
	for _, f := range strings.Split(counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-candidates %q", counts)
		}
		for _, sys := range systems {
			g, err := newGroup(self, storeURL, fmt.Sprintf("bench/requests/%d/%d", time.Now().UnixNano(), n), n, sys)
			if err != nil {
				return err
			}
			if _, err := g.leader(3*sys.t.LeaseDuration + 10*time.Second); err != nil {
				g.stop()
				return err
			}
			// Settled: every candidate started, its first reads (and on a
			// store with a feed, its watch) made, a lease before the count.
			time.Sleep(sys.t.LeaseDuration)
			before, err := g.stats()
			if err == nil {
				time.Sleep(window)
				var after []stats
				after, err = g.stats()
				if err == nil {
					report(n, sys, window, before, after)
				}
			}
			g.stop()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// feedRestarts is, on a store with a change feed, how often an hour its
// server ends a watch (tenure plan's); -1 for a store without one.
var feedRestarts = -1.0

func report(n int, sys sysSpec, window time.Duration, before, after []stats) {
	var reqs, cpu float64
	var gor []int
	for i := range after {
		reqs += float64(after[i].gets + after[i].puts - before[i].gets - before[i].puts)
		cpu += float64(after[i].cpu - before[i].cpu)
		gor = append(gor, after[i].goroutines)
	}
	perHour := reqs * float64(time.Hour) / float64(window)
	planned := ""
	if sys.tenure() {
		p, _ := plan.New(sys.t, n, 0)
		if sys.wake {
			p = p.WithNotices() // the leader reads the standby's record
		}
		if feedRestarts >= 0 {
			p = p.WithFeed(feedRestarts)
		}
		planned = fmt.Sprintf(" (plan %8.0f)", p.RequestsPerHour)
	}
	slices.Sort(gor)
	fmt.Printf("  %-12s %2d candidates: %8.0f requests/h%s, CPU %.3f%% of a core each, goroutines %d to %d\n",
		sys.name, n, perHour, planned, 100*cpu/float64(n)/float64(window), gor[0], gor[len(gor)-1])
}

type stats struct {
	gets, puts int64
	goroutines int
	cpu        time.Duration
}

// stats asks every candidate for its counts (SIGUSR1) and collects them.
func (g *group) stats() ([]stats, error) {
	out := make([]stats, len(g.procs))
	for i, p := range g.procs {
		_ = p.cmd.Process.Signal(syscall.SIGUSR1)
		_, e, err := g.wait(5*time.Second, func(q *proc, e event) bool { return q == p && e.what == "stats" })
		if err != nil || len(e.args) < 4 {
			return nil, fmt.Errorf("stats of %s: %v", p.id, err)
		}
		gets, _ := strconv.ParseInt(e.args[0], 10, 64)
		puts, _ := strconv.ParseInt(e.args[1], 10, 64)
		gor, _ := strconv.Atoi(e.args[2])
		cpu, _ := strconv.ParseInt(e.args[3], 10, 64)
		out[i] = stats{gets, puts, gor, time.Duration(cpu)}
	}
	return out, nil
}

func summary(what string, ds []time.Duration, f func(time.Duration) string) {
	if q := benchkit.Quantiles(ds, f); q != "" {
		fmt.Printf("%-22s %s\n", what, q)
	}
}

func ratio(d, l time.Duration) float64 { return float64(d) / float64(l) }

// jitter spreads the moment of a crash or a stop over d.
func jitter(d time.Duration) time.Duration { return time.Duration(rand.Int64N(int64(d))) }
