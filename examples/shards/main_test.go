package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/sim/simtest"
)

// The default run, in fake time: the partitions move as replicas come and
// go, the cut-off replica's commits are refused once each of its
// partitions has a new owner, and a holds every partition at the end.
func TestShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		o, err := run(t.Context(), &out, options{shards: 8, lease: 2 * time.Second, duration: 20 * time.Second, wake: tenure.NoWake})
		t.Log("\n" + out.String())
		if err != nil {
			t.Fatal(err)
		}
		if o.refused == 0 || o.commits == 0 {
			t.Fatalf("%d commits, %d refused: want b's zombie commits refused", o.commits, o.refused)
		}
	})
}

// TestConsumeUnderFaults runs a partition's consumer on three simulated
// members under every fault set of the simulator: each commit carries the
// shard's fence, so that a consumer whose shard moved (a pause, a suspend,
// a cut-off) is refused, and commits are made.
func TestConsumeUnderFaults(t *testing.T) {
	simtest.Run(t, simtest.Config{Lease: "stream/0", Faults: []string{"all"}}, func(w *simtest.World, n *simtest.Node) {
		g, err := tenure.NewGroup(tenure.GroupConfig{Store: n.Store(), Name: "stream", Shards: 4, Runtime: n.Runtime(),
			OnAssigned: func(ctx context.Context, s tenure.Shard) {
				_ = consume(ctx, n.Clock(), time.Second, func(ctx context.Context) error {
					err := w.Write(ctx, n, fmt.Sprintf("commit %d", s.ID))
					w.Sometimes(n, err == nil, "a commit is accepted")
					if errors.Is(err, fencing.ErrStaleToken) {
						return err
					}
					return nil // no fence once the term has ended: the loop sees it
				})
			}})
		if err != nil {
			t.Error(err)
			return
		}
		_ = g.Run(n.Context())
	})
}
