package tenure_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/lease/memlease"
)

// A daemon embeds leadership with two callbacks: OnElected runs the leader's
// work until its context ends, OnDemoted follows it exactly once.
func Example() {
	ctx, stop := context.WithCancel(context.Background())
	c, err := tenure.New(tenure.Config{
		Lease:   "jobs/nightly-report",
		Store:   memlease.New(), // dynamolease or s3lease across machines
		Runtime: tenure.Runtime{ID: "node-1"},
		Callbacks: tenure.Callbacks{
			OnElected: func(ctx context.Context, term tenure.Term) {
				// A new lease's first token is the time in Unix milliseconds,
				// so that tokens stay above those of a lease record that was
				// lost and created again.
				fmt.Println("elected with a token above the clock:", uint64(term.Token) >= uint64(time.Now().UnixMilli()-60_000))
				stop() // for the example: leave at once
				<-ctx.Done()
			},
			OnDemoted: func(term tenure.Term, reason tenure.DemotionReason) {
				fmt.Println("demoted:", reason)
			},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := c.Run(ctx); err != nil { // releases the lease before returning
		fmt.Println(err)
	}
	// Output:
	// elected with a token above the clock: true
	// demoted: shut down
}

// Two candidates share a store: the second takes over when the first leaves,
// with the next token. The term's context carries the fence to present to a
// resource.
func Example_handoff() {
	store := memlease.New()
	elected := make(chan fencing.Fence)
	run := func(id string) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		c, err := tenure.New(tenure.Config{
			Lease:   "svc/writer",
			Store:   store,
			Runtime: tenure.Runtime{ID: id},
			Timing: tenure.Timing{
				LeaseDuration: time.Second, // short, for the example
			},
			Callbacks: tenure.Callbacks{
				OnElected: func(ctx context.Context, term tenure.Term) {
					f, _ := fencing.FromContext(ctx)
					elected <- f
				},
			},
		})
		if err != nil {
			panic(err)
		}
		done := make(chan struct{})
		go func() { defer close(done); _ = c.Run(ctx) }()
		return func() { cancel(); <-done }
	}
	stopA := run("a")
	a := <-elected
	fmt.Println("a leads", a.Lease)
	stopB := run("b")
	stopA() // a releases; b notices within a poll interval
	b := <-elected
	fmt.Println("b leads", b.Lease, "with the next token:", b.Token == a.Token+1)
	stopB()
	// Output:
	// a leads svc/writer
	// b leads svc/writer with the next token: true
}

// Status tells who leads as observed, and, while this candidate leads, its
// token and local deadline.
func ExampleCandidate_Status() {
	ctx, stop := context.WithCancel(context.Background())
	var c *tenure.Candidate
	c, _ = tenure.New(tenure.Config{
		Lease:   "svc/writer",
		Store:   memlease.New(),
		Runtime: tenure.Runtime{ID: "node-1"},
		Callbacks: tenure.Callbacks{
			OnElected: func(ctx context.Context, term tenure.Term) {
				st := c.Status()
				fmt.Println(st.Leading, st.Leader.Holder, st.Token == term.Token, st.Deadline.After(time.Now()))
				stop()
			},
		},
	})
	_ = c.Run(ctx)
	fmt.Println(c.Status().Leading)
	// Output:
	// true node-1 true true
	// false
}

// A Locker takes locks for pieces of work: TryLock answers at once, naming
// the holder when another has it; Do runs a function under a lock and gives
// it back.
func ExampleLocker() {
	store := memlease.New()
	a, _ := tenure.NewLocker(tenure.LockerConfig{Store: store, Runtime: tenure.Runtime{ID: "worker-a"}})
	defer a.Close()
	b, _ := tenure.NewLocker(tenure.LockerConfig{Store: store, Runtime: tenure.Runtime{ID: "worker-b"}})
	defer b.Close()
	ctx := context.Background()

	h, err := a.TryLock(ctx, "reports/2026-11-24")
	if err != nil {
		fmt.Println(err)
		return
	}
	var held *tenure.LockedError
	if _, err := b.TryLock(ctx, "reports/2026-11-24"); errors.As(err, &held) {
		fmt.Println("b: held by", held.Holder)
	}
	_ = h.Unlock(ctx)
	err = b.Do(ctx, "reports/2026-11-24", func(ctx context.Context, token fencing.Token) error {
		fmt.Println("b: writing with a token above a's:", token > h.Token())
		return nil
	})
	fmt.Println("b:", err)
	// Output:
	// b: held by worker-a
	// b: writing with a token above a's: true
	// b: <nil>
}

// Watch follows a lease without ever writing it: who holds it, and when
// it is given back.
func ExampleWatch() {
	store := memlease.New()
	ctx, stop := context.WithCancel(context.Background())
	l, _ := tenure.NewLocker(tenure.LockerConfig{Store: store, Runtime: tenure.Runtime{ID: "writer-1"}})
	defer l.Close()
	h, _ := l.TryLock(ctx, "svc/writer", tenure.WithPayload([]byte("10.0.0.7:8080")))
	err := tenure.Watch(ctx, tenure.WatchConfig{Lease: "svc/writer", Store: store, Timing: tenure.Timing{PollInterval: 10 * time.Millisecond}},
		func(o tenure.Observation) {
			switch {
			case o.Released:
				fmt.Println("released")
				stop()
			case o.Holder != "":
				fmt.Printf("held by %s at %s\n", o.Holder, o.Payload)
				_ = h.Unlock(context.Background())
			}
		})
	fmt.Println("watch:", err)
	// Output:
	// held by writer-1 at 10.0.0.7:8080
	// released
	// watch: <nil>
}

// A configuration that breaks a rule names the field: match it without
// importing election.
func ExampleFieldError() {
	_, err := tenure.New(tenure.Config{Lease: "a", Store: memlease.New(), Timing: tenure.Timing{LeaseDuration: time.Second, RenewInterval: 2 * time.Second}})
	var fe *tenure.FieldError
	fmt.Println(errors.As(err, &fe), fe.Field)
	// Output: true RenewInterval
}
