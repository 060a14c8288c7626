package main

import (
	"context"
	"testing"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/sim/simtest"
)

// TestWorkUnderFaults runs the daemon's leader work on three simulated
// nodes under every fault set of the simulator: its writes carry the
// term's fence, so that a zombie's (after a pause, a suspend, a cut-off) is
// refused, and they are written.
func TestWorkUnderFaults(t *testing.T) {
	simtest.Run(t, simtest.Config{Lease: "examples/daemon", Faults: []string{"all"}}, func(w *simtest.World, n *simtest.Node) {
		c, err := tenure.New(tenure.Config{Lease: "examples/daemon", Store: n.Store(), Runtime: n.Runtime(),
			Callbacks: tenure.Callbacks{OnElected: work(n.Clock(), func(ctx context.Context) {
				w.Sometimes(n, w.Write(ctx, n, "a line") == nil, "a line is written")
			})}})
		if err != nil {
			t.Error(err)
			return
		}
		_ = c.Run(n.Context())
	})
}
