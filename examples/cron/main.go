// Command cron runs a highly available cron job: several replicas campaign
// for one lease and only the leader runs the job. Partway through, the leader
// crashes (it stops without releasing the lease) and another replica takes
// over once the lease has expired; later the new leader shuts down gracefully
// and hands over within a poll interval.
//
// All replicas share one process and the in-memory store, so it runs with no
// setup:
//
//	go run ./examples/cron
//	go run ./examples/cron -duration 2m -lease 10s -crash-after 30s -handoff-after 80s
//
// It prints one line per election ("elected token=N") and exits 0 once the
// run is over, or 1 if what it saw breaks a guarantee.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/memlease"
)

func main() {
	var (
		nodes        = flag.Int("nodes", 3, "replicas")
		duration     = flag.Duration("duration", 20*time.Second, "how long to run")
		every        = flag.Duration("every", 2*time.Second, "job interval")
		leaseFor     = flag.Duration("lease", 3*time.Second, "lease duration")
		renew        = flag.Duration("renew", 0, "renew interval (default lease/5)")
		poll         = flag.Duration("poll", 0, "follower poll interval (default lease/5)")
		crashAfter   = flag.Duration("crash-after", 7*time.Second, "crash the leader after this long (0: never)")
		handoffAfter = flag.Duration("handoff-after", 15*time.Second, "shut the leader down gracefully after this long (0: never)")
	)
	flag.Parse()
	if *nodes < 1 || *duration <= 0 || *every <= 0 {
		fmt.Fprintln(os.Stderr, "cron: -nodes, -duration and -every must be positive")
		os.Exit(2)
	}
	d := &demo{start: time.Now(), store: memlease.New()}
	if err := d.run(*nodes, *duration, *every, *crashAfter, *handoffAfter, tenure.Config{
		Timing: tenure.Timing{LeaseDuration: *leaseFor, RenewInterval: *renew, PollInterval: *poll},
	}); err != nil {
		fmt.Fprintln(os.Stderr, "cron:", err)
		os.Exit(1)
	}
}

// demo is the whole run: the replicas, the job's resource and what was seen.
type demo struct {
	start time.Time
	store lease.Store
	guard fencing.Guard // the job's resource refuses writes from stale leaders

	mu      sync.Mutex // guards the fields below
	tokens  []fencing.Token
	leading map[string]bool
	runs    int
	broken  []string
	gone    time.Time // when the last leader crashed or left
}

// replica is one candidate with a switch that cuts it off from the store, as
// a crash would.
type replica struct {
	id     string
	c      *tenure.Candidate
	dead   atomic.Bool
	cancel context.CancelFunc
	done   chan error
}

var errCrashed = errors.New("process crashed")

// crashStore stands between a replica and the store; once the replica is
// dead, nothing it sends arrives.
type crashStore struct {
	lease.Store
	r *replica
}

func (s crashStore) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	if s.r.dead.Load() {
		return lease.Record{}, lease.NoVersion, errCrashed
	}
	return s.Store.Get(ctx, name)
}

func (s crashStore) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	if s.r.dead.Load() {
		return lease.NoVersion, errCrashed
	}
	return s.Store.Put(ctx, name, rec, expect)
}

func (d *demo) printf(format string, args ...any) {
	fmt.Printf("%6.2fs  %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

func (d *demo) run(n int, duration, every, crashAfter, handoffAfter time.Duration, timing tenure.Config) error {
	d.leading = map[string]bool{}
	ctx, stopAll := context.WithTimeout(context.Background(), duration)
	defer stopAll()
	replicas := make([]*replica, n)
	for i := range replicas {
		r := &replica{id: fmt.Sprintf("node-%d", i+1), done: make(chan error, 1)}
		cfg := timing
		cfg.Lease, cfg.ID = "jobs/nightly-report", r.id
		cfg.Store = crashStore{Store: d.store, r: r}
		cfg.Callbacks = d.callbacks(r.id, every)
		c, err := tenure.New(cfg)
		if err != nil {
			return err
		}
		r.c = c
		rctx, cancel := context.WithCancel(ctx)
		r.cancel = cancel
		go func() { r.done <- c.Run(rctx) }()
		replicas[i] = r
	}
	d.printf("%d replicas campaign for the lease (lease %v)", n, timing.LeaseDuration)

	leader := func() *replica {
		for _, r := range replicas {
			if !r.dead.Load() && r.c.Status().Leading {
				return r
			}
		}
		return nil
	}
	crash := after(crashAfter)
	handoff := after(handoffAfter)
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-crash:
			if r := leader(); r != nil {
				d.printf("%s CRASHES: it stops without releasing the lease", r.id)
				d.mu.Lock()
				d.gone = time.Now()
				d.mu.Unlock()
				r.dead.Store(true)
				r.cancel()
			}
		case <-handoff:
			if r := leader(); r != nil {
				d.printf("%s shuts down gracefully and releases the lease", r.id)
				d.mu.Lock()
				d.gone = time.Now()
				d.mu.Unlock()
				r.cancel()
			}
		}
	}
	for _, r := range replicas {
		r.cancel()
		if err := <-r.done; err != nil && !r.dead.Load() {
			d.printf("%s: %v", r.id, err)
		}
	}
	return d.summary()
}

func after(d time.Duration) <-chan time.Time {
	if d <= 0 {
		return nil
	}
	return time.After(d)
}

func (d *demo) callbacks(id string, every time.Duration) tenure.Callbacks {
	return tenure.Callbacks{
		OnElected: func(ctx context.Context, term tenure.Term) {
			d.mu.Lock()
			for other, on := range d.leading {
				if on {
					d.broken = append(d.broken, fmt.Sprintf("%s elected while %s leads", id, other))
				}
			}
			if k := len(d.tokens); k > 0 && d.tokens[k-1] >= term.Token {
				d.broken = append(d.broken, fmt.Sprintf("token %d after %d", term.Token, d.tokens[k-1]))
			}
			d.leading[id] = true
			d.tokens = append(d.tokens, term.Token)
			gone := d.gone
			d.gone = time.Time{}
			d.mu.Unlock()
			if gone.IsZero() {
				d.printf("%s elected token=%d", id, term.Token)
			} else {
				d.printf("%s elected token=%d (%.2fs after the previous leader left)", id, term.Token, time.Since(gone).Seconds())
			}

			lead(ctx, clock.New(), every, func(ctx context.Context) { d.job(ctx, id) })
		},
		OnDemoted: func(term tenure.Term, reason tenure.DemotionReason) {
			d.mu.Lock()
			d.leading[id] = false
			d.mu.Unlock()
			d.printf("%s demoted token=%d (%v)", id, term.Token, reason)
		},
	}
}

// lead is the leader's work: it runs the job now and every interval, by
// clk, until the term's context ends. It takes its time from a clock, not
// from package time, so that main_test.go runs it in the simulator.
func lead(ctx context.Context, clk tenure.Clock, every time.Duration, job func(context.Context)) {
	for {
		job(ctx)
		select {
		case <-ctx.Done():
			return
		case <-clk.After(every):
		}
	}
}

// job writes the report through the guard, under the term's fence.
func (d *demo) job(ctx context.Context, id string) {
	f, _ := fencing.FromContext(ctx)
	err := d.guard.Do(f.Lease, f.Token, func() error {
		if ctx.Err() != nil {
			return ctx.Err() // the term ended while we waited
		}
		d.mu.Lock()
		d.runs++
		n := d.runs
		d.mu.Unlock()
		d.printf("%s runs the job, run #%d (token=%d)", id, n, f.Token)
		return nil
	})
	if err != nil && ctx.Err() == nil {
		d.printf("%s: job refused: %v", id, err)
	}
}

func (d *demo) summary() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.printf("done: %d elections, tokens %v, the job ran %d times", len(d.tokens), d.tokens, d.runs)
	if len(d.broken) > 0 {
		return fmt.Errorf("guarantees broken: %v", d.broken)
	}
	if len(d.tokens) == 0 {
		return errors.New("no leader was elected")
	}
	return nil
}
