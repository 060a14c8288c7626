package fencing_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/tenure-go/tenure/fencing"
)

// A resource guarded by tokens refuses a leader that was paused past its
// lease and wakes after a newer leader has written.
func ExampleGuard() {
	var g fencing.Guard
	write := func(token fencing.Token, what string) {
		err := g.Do("jobs/cron", token, func() error {
			fmt.Printf("token %s: %s\n", token, what)
			return nil
		})
		if errors.Is(err, fencing.ErrStaleToken) {
			fmt.Println("refused:", err)
		}
	}

	write(1, "first leader runs the job")
	write(2, "next leader runs the job")
	write(1, "first leader wakes from a long pause")
	write(2, "next leader renews and runs again")
	// Output:
	// token 1: first leader runs the job
	// token 2: next leader runs the job
	// refused: fencing: lease "jobs/cron": token 1 is stale, token 2 was already accepted
	// token 2: next leader renews and runs again
}

// The term's fence travels in the context from OnElected down to the code
// that writes; here the resource is in the same process, so DoContext takes
// the fence from there.
func ExampleGuard_DoContext() {
	var g fencing.Guard
	save := func(ctx context.Context, report string) error {
		return g.DoContext(ctx, func() error {
			fmt.Println("saved:", report)
			return nil
		})
	}

	// What tenure passes to OnElected for term 3, and later for term 4.
	term3 := fencing.NewContext(context.Background(), fencing.Fence{Lease: "jobs/report", Token: 3})
	term4 := fencing.NewContext(context.Background(), fencing.Fence{Lease: "jobs/report", Token: 4})

	fmt.Println(save(term3, "monday"))
	fmt.Println(save(term4, "tuesday"))
	fmt.Println(save(term3, "late monday"))
	fmt.Println(save(context.Background(), "no fence"))
	// Output:
	// saved: monday
	// <nil>
	// saved: tuesday
	// <nil>
	// fencing: lease "jobs/report": token 3 is stale, token 4 was already accepted
	// fencing: no fence in context (pass the context of OnElected, or NewContext)
}

// A resource that keeps one fence with its data (a file, a row) applies the
// same rule with Check, atomically with its write.
func ExampleCheck() {
	stored := fencing.Fence{Lease: "jobs/report", Token: 4}
	fmt.Println(fencing.Check(stored, fencing.Fence{Lease: "jobs/report", Token: 4}))
	fmt.Println(fencing.Check(stored, fencing.Fence{Lease: "jobs/report", Token: 2}))
	fmt.Println(fencing.Check(stored, fencing.Fence{Lease: "jobs/other", Token: 9}))
	// Output:
	// <nil>
	// fencing: lease "jobs/report": token 2 is stale, token 4 was already accepted
	// fencing: write under lease "jobs/other" (token 9) refused: the resource is fenced by lease "jobs/report" (token 4)
}
