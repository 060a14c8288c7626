package tenure_test

import (
	"context"
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
		Lease: "jobs/nightly-report",
		Store: memlease.New(), // dynamolease or s3lease across machines
		ID:    "node-1",
		Callbacks: tenure.Callbacks{
			OnElected: func(ctx context.Context, term tenure.Term) {
				fmt.Println("elected with token", term.Token)
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
	// elected with token 1
	// demoted: shut down
}

// Two candidates share a store: the second takes over when the first leaves,
// with the next token. The term's context carries the fence to present to a
// resource.
func Example_handoff() {
	store := memlease.New()
	elected := make(chan string)
	run := func(id string) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		c, err := tenure.New(tenure.Config{
			Lease:         "svc/writer",
			Store:         store,
			ID:            id,
			LeaseDuration: time.Second, // short, for the example
			Callbacks: tenure.Callbacks{
				OnElected: func(ctx context.Context, term tenure.Term) {
					f, _ := fencing.FromContext(ctx)
					elected <- fmt.Sprintf("%s leads %s with token %d", id, f.Lease, f.Token)
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
	fmt.Println(<-elected)
	stopB := run("b")
	stopA() // a releases; b notices within a poll interval
	fmt.Println(<-elected)
	stopB()
	// Output:
	// a leads svc/writer with token 1
	// b leads svc/writer with token 2
}

// Status tells who leads as observed, and, while this candidate leads, its
// token and local deadline.
func ExampleCandidate_Status() {
	ctx, stop := context.WithCancel(context.Background())
	var c *tenure.Candidate
	c, _ = tenure.New(tenure.Config{
		Lease: "svc/writer",
		Store: memlease.New(),
		ID:    "node-1",
		Callbacks: tenure.Callbacks{
			OnElected: func(ctx context.Context, term tenure.Term) {
				st := c.Status()
				fmt.Println(st.Leading, st.Leader.ID, st.Token, st.Deadline.After(time.Now()))
				stop()
			},
		},
	})
	_ = c.Run(ctx)
	fmt.Println(c.Status().Leading)
	// Output:
	// true node-1 1 true
	// false
}
