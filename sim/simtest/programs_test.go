package simtest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tenure-go/tenure"
)

// The buggy programs users write around leader election and locks, each
// with its fixed twin: each is a few dozen lines a real user would write,
// and the world must fail every buggy one (bugs_test.go) and pass every
// fixed one.

// noZombies are the fault sets without a pause between a check and an act:
// no unfenced effect survives one, however careful the code (fencedWriter).
var noZombies = []string{"leader-crash", "leader-cut-off", "constant-skew", "ntp-step", "long-tail-latency", "partition-flapping"}

// program is a buggy user program or its fixed twin.
type program struct {
	name  string
	cfg   Config
	buggy func(w *World, n *Node)
	fixed func(w *World, n *Node)
}

var programs = []program{
	{
		name:  "cron job on context.Background()",
		cfg:   Config{Faults: noZombies},
		buggy: cron(func(context.Context) context.Context { return context.Background() }),
		fixed: cron(func(term context.Context) context.Context { return term }),
	},
	{
		name:  "leadership cached in a variable",
		cfg:   Config{Faults: noZombies},
		buggy: cachedLeader(false),
		fixed: cachedLeader(true),
	},
	{
		name:  "writes without the token",
		cfg:   Config{Faults: []string{"gc-pause", "vm-suspend"}},
		buggy: leaderWriter(false),
		fixed: leaderWriter(true),
	},
	{
		name:  "lock work past the lock's context",
		cfg:   Config{Lease: "job", Faults: noZombies},
		buggy: lockWorker(false),
		fixed: lockWorker(true),
	},
	{
		name:  "shard consumed after it moved",
		cfg:   Config{Lease: "jobs/0", Faults: noZombies},
		buggy: consumer(false),
		fixed: consumer(true),
	},
	{
		name:  "side effect before the check",
		cfg:   Config{Faults: noZombies},
		buggy: checkAfter(false),
		fixed: checkAfter(true),
	},
}

// must panics on the error of a config the program got right.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// cron is a leader that runs a job every 30s; the job sends five batches,
// 5s apart, checking its context before each. jobCtx picks the context the
// job gets: the bug hands it context.Background(), so that a job that
// began in the term goes on after it.
func cron(jobCtx func(term context.Context) context.Context) func(w *World, n *Node) {
	return func(w *World, n *Node) {
		job := func(ctx context.Context) {
			for i := range 5 {
				if ctx.Err() != nil {
					return
				}
				w.Effect(n, fmt.Sprintf("batch %d", i))
				select {
				case <-ctx.Done():
				case <-n.Clock().After(5 * time.Second):
				}
			}
		}
		c := must(tenure.New(tenure.Config{Lease: "leader", Store: n.Store(), Runtime: n.Runtime(),
			Callbacks: tenure.Callbacks{OnElected: func(ctx context.Context, _ tenure.Term) {
				for {
					job(jobCtx(ctx))
					select {
					case <-ctx.Done():
						return
					case <-n.Clock().After(30 * time.Second):
					}
				}
			}}}))
		_ = c.Run(n.Context())
	}
}

// cachedLeader keeps "am I the leader?" in a variable that a loop of its
// own reads every 3s; the bug never clears it when the term ends.
func cachedLeader(clear bool) func(w *World, n *Node) {
	return func(w *World, n *Node) {
		var isLeader atomic.Bool
		c := must(tenure.New(tenure.Config{Lease: "leader", Store: n.Store(), Runtime: n.Runtime(),
			Callbacks: tenure.Callbacks{OnElected: func(ctx context.Context, _ tenure.Term) {
				isLeader.Store(true)
				<-ctx.Done()
				if clear {
					isLeader.Store(false)
				}
			}}}))
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = c.Run(n.Context())
		}()
		for {
			select {
			case <-done:
				return
			case <-n.Clock().After(3 * time.Second):
			}
			if isLeader.Load() {
				w.Effect(n, "tick")
			}
		}
	}
}

// leaderWriter writes a row every second while it leads, checking its
// term first; a pause between the check and the write makes it a zombie.
// The bug writes to a store that checks no token (an effect); the fix
// writes with the term's token to one that checks it, which refuses the
// zombie's write.
func leaderWriter(fenced bool) func(w *World, n *Node) {
	return func(w *World, n *Node) {
		c := must(tenure.New(tenure.Config{Lease: "leader", Store: n.Store(), Runtime: n.Runtime(),
			Callbacks: tenure.Callbacks{OnElected: func(ctx context.Context, term tenure.Term) {
				for i := 0; ; i++ {
					select {
					case <-ctx.Done():
						return
					case <-n.Clock().After(time.Second):
					}
					if ctx.Err() != nil {
						return
					}
					row := fmt.Sprintf("row %d of term %d", i, term.Token)
					if fenced {
						_ = w.Write(ctx, n, row) // refused once a newer term wrote
					} else {
						w.Effect(n, row)
					}
				}
			}}}))
		_ = c.Run(n.Context())
	}
}

// lockWorker takes the lock "job", works five steps 5s apart, lets go, and
// comes back 10s later. The bug ignores the lock's context: a holder cut
// off from the store works on after its lock ran out.
func lockWorker(respect bool, opts ...tenure.LockOption) func(w *World, n *Node) {
	return func(w *World, n *Node) {
		l := must(tenure.NewLocker(tenure.LockerConfig{Store: n.Store(), Runtime: n.Runtime()}))
		defer l.Close()
		ctx := n.Context()
		for ctx.Err() == nil {
			h, err := l.Lock(ctx, "job", opts...)
			if err != nil {
				continue // ctx is done, or the store failed: try again
			}
			for i := range 5 {
				if respect && h.Context().Err() != nil {
					break
				}
				w.EffectContext(h.Context(), n, fmt.Sprintf("step %d", i))
				if respect {
					select {
					case <-h.Context().Done():
					case <-n.Clock().After(5 * time.Second):
					}
				} else {
					<-n.Clock().After(5 * time.Second)
				}
			}
			_ = h.Unlock(context.Background())
			select {
			case <-ctx.Done():
			case <-n.Clock().After(10 * time.Second):
			}
		}
	}
}

// consumer is a member of a group of four shards that consumes each shard
// it holds every 2s. The bug consumes on a goroutine of its own with
// context.Background(), so it never stops consuming a shard that moved.
func consumer(stop bool) func(w *World, n *Node) {
	return func(w *World, n *Node) {
		consume := func(ctx context.Context, s tenure.Shard) {
			for {
				w.EffectContext(ctx, n, fmt.Sprintf("consume %s/%d", s.Group, s.ID))
				select {
				case <-ctx.Done():
					return
				case <-n.Clock().After(2 * time.Second):
				}
			}
		}
		g := must(tenure.NewGroup(tenure.GroupConfig{Store: n.Store(), Name: "jobs", Shards: 4, Runtime: n.Runtime(),
			OnAssigned: func(ctx context.Context, s tenure.Shard) {
				if stop {
					consume(ctx, s)
					return
				}
				go consume(n.Context(), s) // outlives the shard
			}}))
		_ = g.Run(n.Context())
	}
}

// checkAfter acts every 30s while it leads. The bug acts, then checks its
// term: a term that ended while it waited still gets one more act.
func checkAfter(checkFirst bool) func(w *World, n *Node) {
	return func(w *World, n *Node) {
		c := must(tenure.New(tenure.Config{Lease: "leader", Store: n.Store(), Runtime: n.Runtime(),
			Callbacks: tenure.Callbacks{OnElected: func(ctx context.Context, _ tenure.Term) {
				for {
					if checkFirst {
						select {
						case <-ctx.Done():
							return
						case <-n.Clock().After(30 * time.Second):
						}
						if ctx.Err() != nil {
							return
						}
						w.Effect(n, "report")
						continue
					}
					<-n.Clock().After(30 * time.Second)
					w.Effect(n, "report")
					if ctx.Err() != nil {
						return
					}
				}
			}}}))
		_ = c.Run(n.Context())
	}
}
