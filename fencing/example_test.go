package fencing_test

import (
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
