package main

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/sim/simtest"
)

// Five replicas whose clocks tick up to 500ms apart run each of 20 slots
// exactly once.
func TestEverySlotOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		ran, err := run(context.Background(), &out, 5, time.Second, 20*time.Second, 500*time.Millisecond)
		if err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		if len(ran) != 20 {
			t.Fatalf("%d slots ran, want 20:\n%s", len(ran), out.String())
		}
	})
}

// TestAtMostOncePerSlotUnderFaults runs each replica's scheduler on a
// simulated node under the simulator's crashes, pauses, partitions and
// lost answers (not under its skewed wall clocks: a slot is the wall
// clock's, and docs/cli.md says the replicas' must agree within one): no
// slot's job is done twice, and slots are done.
func TestAtMostOncePerSlotUnderFaults(t *testing.T) {
	const every = 2 * time.Second
	faults := []string{"leader-crash", "leader-cut-off", "gc-pause", "partition-flapping", "long-tail-latency",
		"lost-renewal-response", "lost-takeover-response", "delayed-write", "store-brownout"}
	check := func(h *simtest.History) error {
		by := map[string]string{}
		var last time.Duration
		for _, a := range h.Acts {
			if a.Kind != simtest.ActWrite {
				continue
			}
			last = a.At
			if who, ok := by[a.Fence.Lease]; ok {
				return fmt.Errorf("%s ran on %s and on %s", a.Fence.Lease, who, a.Node)
			}
			by[a.Fence.Lease] = a.Node
		}
		if len(by) < 10 || len(by) > int(last/every)+2 {
			return fmt.Errorf("%d slots ran in %v of slots of %v", len(by), last, every)
		}
		return nil
	}
	simtest.Run(t, simtest.Config{Lease: "job", Faults: faults, Check: check}, func(w *simtest.World, n *simtest.Node) {
		l, err := tenure.NewLocker(tenure.LockerConfig{Store: n.Store(), Runtime: n.Runtime(), Timing: tenure.Timing{LeaseDuration: 2 * every}})
		if err != nil {
			t.Error(err)
			return
		}
		defer l.Close()
		clk := n.Clock()
		start := clk.Now().Truncate(every).Add(every)
		replica(n.Context(), clk, l, n.Name(), start, every, time.Hour, 0, func(ctx context.Context, _ string, slot int64, _ fencing.Token) {
			_ = w.Write(ctx, n, fmt.Sprintf("slot %d", slot))
		})
	})
}
