//go:build unix

// Command locks measures tenure's locks against a real store: how long a
// lock takes to pass from one process to another when its holder unlocks
// (plain and fair waiters, with or without wake-ups), and what fair waiting
// costs: store requests per waiter per hour for 2 to 50 waiters queued
// behind a holder. docs/performance.md explains the method.
//
//	scripts/testservers.sh run -- go run ./bench/locks             # DynamoDB Local
//	scripts/testservers.sh run -- go run ./bench/locks -wake       # waiters woken on Unlock
//	go run ./bench/locks -store 'dynamodb://locks?region=eu-west-1' # any store URL
//
// Without -store it uses DynamoDB Local at $TENURE_DYNAMODB_ENDPOINT (a new
// table per run), else a file store in a temporary directory. Each process
// that takes the lock is this program again, in -role locker: it locks,
// says so on stdout, unlocks when told on stdin, and locks again.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/internal/benchkit"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/storeurl"
)

// timing is what the benchmark passes to every Locker.
type timing struct {
	lease, renew, poll time.Duration
	wake               bool // listen for wake-ups on loopback
}

func (t timing) config(store lease.Store, id string) tenure.LockerConfig {
	c := tenure.LockerConfig{Store: store, Runtime: tenure.Runtime{ID: id}, Timing: tenure.Timing{LeaseDuration: t.lease, RenewInterval: t.renew, PollInterval: t.poll}}
	if t.wake {
		c.WakeAddr = "127.0.0.1:0"
	}
	return c
}

func main() {
	var (
		role     = flag.String("role", "bench", "bench, or locker (internal)")
		storeURL = flag.String("store", "", "store URL (default: DynamoDB Local at $TENURE_DYNAMODB_ENDPOINT, else a file store)")
		leaseDur = flag.Duration("lease", 10*time.Second, "lease duration (L)")
		renew    = flag.Duration("renew", 0, "renewal interval (default L/5)")
		poll     = flag.Duration("poll", 0, "poll interval (default L/5)")
		trials   = flag.Int("trials", 40, "handoffs to time, plain and fair each")
		procs    = flag.Int("procs", 3, "processes taking turns with the lock")
		window   = flag.Duration("window", 60*time.Second, "how long to count the requests of fair waiters")
		counts   = flag.String("waiters", "2,5,10,50", "numbers of fair waiters for the request counts; empty: none")
		name     = flag.String("name", "", "locker: lock name")
		id       = flag.String("id", "", "locker: ID")
		fair     = flag.Bool("fair", false, "locker: wait with tenure.Fair()")
		wake     = flag.Bool("wake", false, "Lockers listen for wake-ups on loopback (Runtime.WakeAddr): an Unlock wakes the next waiter")
	)
	flag.Parse()
	t := timing{*leaseDur, *renew, *poll, *wake}
	if *role == "locker" {
		if err := locker(*storeURL, *name, *id, *fair, t); err != nil {
			fmt.Fprintln(os.Stderr, "locker:", err)
			os.Exit(1)
		}
		return
	}
	if err := bench(*storeURL, t, *trials, *procs, *window, *counts); err != nil {
		fmt.Fprintln(os.Stderr, "locks:", err)
		os.Exit(1)
	}
}

// locker takes the lock when told: on a line "lock" on stdin it locks and
// says "NS locked TOKEN"; on "unlock" it says "NS unlocking" and unlocks.
// It ends when stdin closes.
func locker(storeURL, name, id string, fair bool, t timing) error {
	ctx := context.Background()
	s, err := storeurl.Open(ctx, storeURL)
	if err != nil {
		return err
	}
	l, err := tenure.NewLocker(t.config(s, id))
	if err != nil {
		return err
	}
	defer l.Close()
	say := func(format string, args ...any) {
		fmt.Printf("%d %s\n", time.Now().UnixNano(), fmt.Sprintf(format, args...))
	}
	var opts []tenure.LockOption
	if fair {
		opts = append(opts, tenure.Fair())
	}
	in := bufio.NewScanner(os.Stdin)
	say("started")
	var h *tenure.Lock
	for in.Scan() {
		switch {
		case in.Text() == "lock" && h == nil:
			if h, err = l.Lock(ctx, name, opts...); err != nil {
				return err
			}
			say("locked %d", h.Token())
		case in.Text() == "unlock" && h != nil:
			say("unlocking")
			if err := h.Unlock(ctx); err != nil {
				return err
			}
			h = nil
		}
	}
	return nil
}

func bench(storeURL string, t timing, trials, procs int, window time.Duration, counts string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	storeURL, done, err := benchkit.StoreURL(storeURL)
	if err != nil {
		return err
	}
	defer done()
	cfg := t.config(nil, "")
	if _, err := tenure.NewLocker(tenure.LockerConfig{Store: &benchkit.Counting{}, Timing: tenure.Timing{LeaseDuration: cfg.LeaseDuration, RenewInterval: cfg.RenewInterval, PollInterval: cfg.PollInterval}}); err != nil {
		return err // refused timings
	}
	fmt.Printf("store %s\nlease L = %v, renew %v, poll %v (0: L/5), wake-ups %v\n\n", storeURL, t.lease, t.renew, t.poll, t.wake)
	if trials > 0 {
		for _, fair := range []bool{false, true} {
			ds, err := handoffs(self, storeURL, t, trials, procs, fair)
			if err != nil {
				return err
			}
			what := "plain handoff"
			if fair {
				what = "fair handoff"
			}
			summary(what, ds)
		}
		fmt.Println()
	}
	if counts == "" {
		return nil
	}
	return fairCost(storeURL, t, window, counts)
}

// proc is a process of -role locker.
type proc struct {
	id  string
	cmd *exec.Cmd
	in  *bufio.Writer
}

type event struct {
	p    *proc
	at   time.Time
	what string
}

// handoffs starts procs lockers on a fresh lock and times trials
// handoffs: from a holder's "unlocking" to the next "locked". The
// coordinator tells the holder to unlock at a random moment of the poll
// after the one that follows its lock, so that the waiters are anywhere
// in their polls; the old holder locks again only once another holds the
// lock, so that every handoff goes to another process.
func handoffs(self, storeURL string, t timing, trials, procs int, fair bool) ([]time.Duration, error) {
	name := fmt.Sprintf("bench/%d", time.Now().UnixNano())
	ch := make(chan event, 1024)
	var ps []*proc
	defer func() {
		for _, p := range ps {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range ps {
			_ = p.cmd.Wait()
		}
	}()
	for i := range procs {
		cmd := exec.Command(self, "-role", "locker", "-store", storeURL, "-name", name, "-id", fmt.Sprintf("p%d", i),
			"-lease", t.lease.String(), "-renew", t.renew.String(), "-poll", t.poll.String(), "-fair="+strconv.FormatBool(fair),
			"-wake="+strconv.FormatBool(t.wake))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		p := &proc{id: fmt.Sprintf("p%d", i), cmd: cmd, in: bufio.NewWriter(stdin)}
		ps = append(ps, p)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) >= 2 {
					ns, _ := strconv.ParseInt(f[0], 10, 64)
					ch <- event{p, time.Unix(0, ns), f[1]}
				}
			}
			ch <- event{p, time.Now(), "exit"}
		}()
	}
	poll := t.poll
	if poll == 0 {
		poll = t.lease / 5
	}
	wait := func(d time.Duration, what string) (event, error) {
		timeout := time.After(d)
		for {
			select {
			case e := <-ch:
				if e.what == "exit" {
					return e, fmt.Errorf("%s exited", e.p.id)
				}
				if e.what == what {
					return e, nil
				}
			case <-timeout:
				return event{}, fmt.Errorf("no %q within %v", what, d)
			}
		}
	}
	tell := func(p *proc, line string) error {
		fmt.Fprintln(p.in, line)
		return p.in.Flush()
	}
	long := 3*t.lease + 30*time.Second
	for range ps {
		if _, err := wait(long, "started"); err != nil {
			return nil, err
		}
	}
	for _, p := range ps {
		if err := tell(p, "lock"); err != nil {
			return nil, err
		}
	}
	e, err := wait(long, "locked")
	if err != nil {
		return nil, err
	}
	holder := e.p
	var ds []time.Duration
	for i := range trials {
		time.Sleep(poll + time.Duration(rand.Int64N(int64(poll))))
		if err := tell(holder, "unlock"); err != nil {
			return nil, err
		}
		u, err := wait(long, "unlocking")
		if err != nil {
			return nil, err
		}
		l, err := wait(long, "locked")
		if err != nil {
			return nil, err
		}
		d := l.at.Sub(u.at)
		ds = append(ds, d)
		fmt.Printf("  trial %2d: %s -> %s in %v\n", i+1, holder.id, l.p.id, d.Round(100*time.Microsecond))
		// The old holder waits again, behind the others if fair.
		if err := tell(holder, "lock"); err != nil {
			return nil, err
		}
		holder = l.p
	}
	return ds, nil
}

// fairCost queues n fair waiters behind a holder, all in this process with
// a Locker and a counting store each, lets them settle for a lease, and
// counts their requests over window.
func fairCost(storeURL string, t timing, window time.Duration, counts string) error {
	fmt.Printf("fair waiters queued behind a holder: store requests per waiter per hour over %v\n", window)
	for _, f := range strings.Split(counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-waiters %q", counts)
		}
		if err := fairCostOf(storeURL, t, window, n); err != nil {
			return err
		}
	}
	return nil
}

func fairCostOf(storeURL string, t timing, window time.Duration, n int) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := storeurl.Open(ctx, storeURL)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("bench/cost/%d/%d", time.Now().UnixNano(), n)
	holder, err := tenure.NewLocker(t.config(s, "holder"))
	if err != nil {
		return err
	}
	defer holder.Close()
	if _, err := holder.Lock(ctx, name); err != nil {
		return err
	}
	stores := make([]*benchkit.Counting, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i := range n {
		var wrapped lease.Store
		wrapped, stores[i] = benchkit.Count(s)
		l, err := tenure.NewLocker(t.config(wrapped, fmt.Sprintf("w%d", i)))
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer l.Close()
			_, _ = l.Lock(ctx, name, tenure.Fair()) // until cancelled
		}()
	}
	time.Sleep(t.lease + window/10) // every waiter queued, at its settled pace
	take := func() (gets, puts, conflicts int64) {
		for _, c := range stores {
			gets, puts, conflicts = gets+c.Gets.Load(), puts+c.Puts.Load(), conflicts+c.Conflicts.Load()
		}
		return
	}
	g0, p0, c0 := take()
	time.Sleep(window)
	g1, p1, c1 := take()
	perHour := func(x int64) float64 { return float64(x) * float64(time.Hour) / float64(window) / float64(n) }
	puts := p1 - p0
	fmt.Printf("  %2d waiters: %6.0f requests/h each (%5.0f reads, %5.0f writes); %4.1f%% of writes refused\n",
		n, perHour(g1-g0+puts), perHour(g1-g0), perHour(puts), 100*float64(c1-c0)/float64(max(puts, 1)))
	return nil
}

func summary(what string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	r := func(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }
	fmt.Printf("%-14s min %s  median %s  p90 %s  max %s  (%d handoffs)\n", what, r(s[0]), r(q(0.5)), r(q(0.9)), r(s[len(s)-1]), len(s))
}
