// Command shards runs a partitioned consumer: the partitions of a stream
// are the shards of a tenure.Group, spread over the replicas, and each
// shard's consumer commits its offset through a fenced resource, so that a
// replica that lost a shard cannot commit over its next owner.
//
// Three replicas share one process and the in-memory store, so it runs
// with no setup:
//
//	go run ./examples/shards
//	go run ./examples/shards -shards 16 -duration 40s
//
// a and b start; c joins and takes its share; b is cut off from the store
// (a crash, as the others see it) but keeps trying to commit, and the
// fence refuses it once a shard's new owner has committed; c leaves
// gracefully and hands its shards back. It prints the group's moves and
// exits 0, or 1 if what it saw breaks a guarantee.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/memlease"
)

type options struct {
	shards   int
	lease    time.Duration
	duration time.Duration
	wake     string // the members' WakeAddr
}

func main() {
	var o options
	flag.IntVar(&o.shards, "shards", 8, "partitions of the stream")
	flag.DurationVar(&o.lease, "lease", 2*time.Second, "each shard's lease")
	flag.DurationVar(&o.duration, "duration", 20*time.Second, "how long to run")
	flag.Parse()
	o.wake = "127.0.0.1:0"
	if _, err := run(context.Background(), os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "shards:", err)
		os.Exit(1)
	}
}

// offsets is the fenced resource: each partition's committed offset. A
// commit consumes the partition's next message and moves its offset on,
// through the Guard with the shard's fence: a commit of an older term than
// one already seen for the partition is refused.
type offsets struct {
	guard fencing.Guard
	mu    sync.Mutex
	at    map[int]int
}

func (r *offsets) commit(ctx context.Context, shard int) error {
	return r.guard.DoContext(ctx, func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.at[shard]++
		return nil
	})
}

// cutStore cuts a replica off from the store.
type cutStore struct {
	lease.Store
	cut atomic.Bool
}

var errCut = errors.New("cut off from the store")

func (s *cutStore) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	if s.cut.Load() {
		return lease.Record{}, "", errCut
	}
	return s.Store.Get(ctx, name)
}

func (s *cutStore) Put(ctx context.Context, name string, rec lease.Record, v lease.Version) (lease.Version, error) {
	if s.cut.Load() {
		return "", errCut
	}
	return s.Store.Put(ctx, name, rec, v)
}

// consume is one partition's consumer: every interval by clk it commits
// the partition's next message with the fence ctx carries, until ctx ends
// (nil) or a commit fails (fencing.ErrStaleToken once a newer owner
// committed). It takes its time from a clock, not from package time, so
// that main_test.go runs it in the simulator.
func consume(ctx context.Context, clk tenure.Clock, every time.Duration, commit func(context.Context) error) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-clk.After(every):
		}
		if err := commit(ctx); err != nil {
			return err
		}
	}
}

// outcome is what a run saw.
type outcome struct {
	commits, refused int
	broken           []string
}

func run(ctx context.Context, w io.Writer, o options) (outcome, error) {
	start := time.Now()
	var wmu sync.Mutex // the shards' callbacks run at once
	say := func(format string, args ...any) {
		wmu.Lock()
		defer wmu.Unlock()
		fmt.Fprintf(w, "%6.2fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	store := memlease.New()
	res := &offsets{at: map[int]int{}}
	var mu sync.Mutex
	var out outcome
	type replica struct {
		store *cutStore
		g     *tenure.Group
		stop  context.CancelFunc
		done  chan error
	}
	replicas := map[string]*replica{}
	join := func(id string) {
		r := &replica{store: &cutStore{Store: store}, done: make(chan error, 1)}
		g, err := tenure.NewGroup(tenure.GroupConfig{
			Store: r.store, Name: "stream", Shards: o.shards, Runtime: tenure.Runtime{ID: id, WakeAddr: o.wake}, Timing: tenure.Timing{LeaseDuration: o.lease},
			// The consumer of one partition: it reads on from the committed
			// offset and commits every message. A replica cut off from the
			// store goes on (it cannot know), and its commits are refused
			// once the shard's next owner has committed.
			OnAssigned: func(ctx context.Context, s tenure.Shard) {
				say("%s: partition %d, token %d", id, s.ID, s.Token)
				commit := func(ctx context.Context) error {
					err := res.commit(ctx, s.ID)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						out.commits++
					case errors.Is(err, fencing.ErrStaleToken):
						out.refused++
						say("%s: partition %d commit refused (token %d): %v", id, s.ID, s.Token, err)
						return err
					case ctx.Err() != nil: // the term ended as the commit began
					default:
						out.broken = append(out.broken, err.Error())
					}
					return nil
				}
				_ = consume(ctx, clock.New(), o.lease/20, commit)
				if ctx.Err() == nil || !r.store.cut.Load() {
					return
				}
				// Cut off, it cannot know its term ended: it writes on with its
				// fence, and the fence must refuse it within 5 leases.
				zombie, cancel := context.WithTimeout(fencing.NewContext(context.Background(), s.Fence()), 5*o.lease)
				defer cancel()
				if consume(zombie, clock.New(), o.lease/20, commit) == nil {
					mu.Lock()
					out.broken = append(out.broken, fmt.Sprintf("%s: partition %d's commits with token %d still accepted 5 leases after its term", id, s.ID, s.Token))
					mu.Unlock()
				}
			},
			OnRevoked: func(s tenure.Shard, reason tenure.DemotionReason) {
				say("%s: partition %d revoked: %v", id, s.ID, reason)
			},
		})
		if err != nil {
			panic(err)
		}
		var cctx context.Context
		cctx, r.stop = context.WithCancel(ctx)
		r.g = g
		replicas[id] = r
		go func() { r.done <- g.Run(cctx) }()
		say("%s joins", id)
	}
	step := o.duration / 5
	sleep := func() { time.Sleep(step) }
	join("a")
	join("b")
	sleep()
	join("c")
	sleep()
	say("b is cut off from the store")
	replicas["b"].store.cut.Store(true)
	sleep()
	sleep()
	say("c leaves")
	replicas["c"].stop()
	if err := <-replicas["c"].done; err != nil {
		return out, err
	}
	sleep()
	if st := replicas["a"].g.Status(); len(st.Held) != o.shards {
		out.broken = append(out.broken, fmt.Sprintf("a holds %d of %d partitions at the end", len(st.Held), o.shards))
	}
	for _, id := range []string{"a", "b"} {
		replicas[id].stop()
		<-replicas[id].done
	}
	say("%d commits, %d refused by the fence", out.commits, out.refused)
	if len(out.broken) > 0 {
		return out, fmt.Errorf("broken: %v", out.broken)
	}
	return out, nil
}
