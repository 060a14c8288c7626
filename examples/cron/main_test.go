package main

import (
	"context"
	"testing"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/sim/simtest"
)

// TestLeadUnderFaults runs the leader's work on three simulated nodes
// under every fault set of the simulator: the report is written through a
// fenced resource, so that a zombie's write (after a pause, a suspend, a
// cut-off) is refused, and reports are written.
func TestLeadUnderFaults(t *testing.T) {
	simtest.Run(t, simtest.Config{Lease: "jobs/nightly-report", Faults: []string{"all"}}, func(w *simtest.World, n *simtest.Node) {
		c, err := tenure.New(tenure.Config{Lease: "jobs/nightly-report", Store: n.Store(), Runtime: n.Runtime(),
			Callbacks: tenure.Callbacks{OnElected: func(ctx context.Context, _ tenure.Term) {
				lead(ctx, n.Clock(), 2*time.Second, func(ctx context.Context) {
					w.Sometimes(n, w.Write(ctx, n, "nightly report") == nil, "a report is written")
				})
			}}})
		if err != nil {
			t.Error(err)
			return
		}
		_ = c.Run(n.Context())
	})
}
