package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/sim/simtest"
)

// simResource is the simulator's fenced resource, as a resource.
type simResource struct {
	w *simtest.World
	n *simtest.Node
}

func (s simResource) Write(ctx context.Context, value string) error {
	return s.w.Write(ctx, s.n, value)
}

func (simResource) Read(context.Context) (string, fencing.Fence, error) {
	return "", fencing.Fence{}, nil
}

func (simResource) String() string { return "the simulator's fenced resource" }

// TestLeadUnderFaults runs the leader's writer on three simulated nodes
// under every fault set of the simulator, real pauses among them rather
// than the demo's frozen writer: every write carries the term's fence, so
// that a zombie's is refused, and writes are accepted.
func TestLeadUnderFaults(t *testing.T) {
	simtest.Run(t, simtest.Config{Lease: "singlewriter", Faults: []string{"all"}}, func(w *simtest.World, n *simtest.Node) {
		d := &demo{w: io.Discard, res: simResource{w, n}, every: 300 * time.Millisecond, clk: n.Clock()}
		r := &replica{id: n.Name()}
		c, err := tenure.New(tenure.Config{Lease: "singlewriter", Store: n.Store(), Runtime: n.Runtime(),
			Callbacks: tenure.Callbacks{OnElected: func(ctx context.Context, term tenure.Term) {
				w.Sometimes(n, true, "a leader writes")
				d.lead(ctx, r, term)
			}}})
		if err != nil {
			t.Error(err)
			return
		}
		_ = c.Run(n.Context())
	})
}
