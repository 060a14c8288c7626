// Command lockcron runs a cron job on every replica's schedule, each slot
// exactly once: at the start of a slot every replica runs
//
//	l.Do(ctx, "job", job, tenure.OncePer(every))
//
// The first to get the slot's lock runs the job, and the lock is kept until
// the slot is over, so that a replica whose clock ticks late finds it taken
// (tenure.ErrSlotTaken). It is what `tenure lock --once-per` does from a
// crontab.
//
// All replicas share one process and the in-memory store, and their clocks
// tick up to -skew apart, so it runs with no setup:
//
//	go run ./examples/lockcron
//	go run ./examples/lockcron -replicas 5 -every 1s -duration 10s -skew 300ms
//
// It prints who ran each slot, and exits 0 when every slot ran exactly once,
// 1 otherwise. With a shared store (dynamolease, s3lease) the same code runs
// across machines. A replica that crashes during the job leaves its slot
// unfinished: the lock then expires, but the slot is over for the others (at
// most once).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/lease/memlease"
)

func main() {
	var (
		replicas = flag.Int("replicas", 3, "replicas")
		every    = flag.Duration("every", 2*time.Second, "schedule: one slot every interval (whole seconds)")
		duration = flag.Duration("duration", 10*time.Second, "how long to run")
		skew     = flag.Duration("skew", 200*time.Millisecond, "how far apart the replicas' clocks tick")
	)
	flag.Parse()
	if *replicas < 1 || *every < time.Second || *every%time.Second != 0 || *duration <= 0 || *skew < 0 || *skew >= *every {
		fmt.Fprintln(os.Stderr, "lockcron: -replicas and -duration must be positive, -every whole seconds, and -skew below -every")
		os.Exit(2)
	}
	ran, err := run(context.Background(), os.Stdout, *replicas, *every, *duration, *skew)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockcron:", err)
		os.Exit(1)
	}
	fmt.Printf("every one of %d slots ran exactly once\n", len(ran))
}

// run runs the replicas for duration and returns, per slot, who ran it.
func run(ctx context.Context, out io.Writer, replicas int, every, duration, skew time.Duration) (map[int64][]string, error) {
	store := memlease.New()
	start := time.Now().Truncate(every).Add(every) // OncePer's slots are aligned to the Unix epoch
	var mu sync.Mutex                              // guards ran and out
	ran := map[int64][]string{}
	job := func(_ context.Context, id string, slot int64, tok fencing.Token) {
		mu.Lock()
		defer mu.Unlock()
		ran[slot] = append(ran[slot], id)
		fmt.Fprintf(out, "%6.2fs  slot %d: %s runs the job (token %d)\n", time.Since(start).Seconds(), slot, id, tok)
	}
	var wg sync.WaitGroup
	for i := range replicas {
		id := fmt.Sprintf("replica-%d", i+1)
		l, err := tenure.NewLocker(tenure.LockerConfig{Store: store, Runtime: tenure.Runtime{ID: id}, Timing: tenure.Timing{LeaseDuration: 2 * every}})
		if err != nil {
			return nil, err
		}
		offset := time.Duration(rand.Int64N(int64(skew) + 1)) // this replica's clock ticks late by this much
		wg.Go(func() {
			defer l.Close()
			replica(ctx, clock.New(), l, id, start, every, duration, offset, job)
		})
	}
	wg.Wait()
	var errs []error
	for slot := int64(0); slot < int64(duration/every); slot++ {
		if n := len(ran[slot]); n != 1 {
			errs = append(errs, fmt.Errorf("slot %d ran %d times: %v", slot, n, ran[slot]))
		}
	}
	return ran, errors.Join(errs...)
}

// replica is one replica's scheduler: at each slot's start on its own clock
// (clk, from which it takes its time so that main_test.go runs it in the
// simulator) it runs the job, unless another replica has run it in this
// slot.
func replica(ctx context.Context, clk tenure.Clock, l *tenure.Locker, id string, start time.Time, every, duration, offset time.Duration, job func(context.Context, string, int64, fencing.Token)) {
	for slot := int64(0); slot < int64(duration/every); slot++ {
		select {
		case <-ctx.Done():
			return
		case <-clk.After(start.Add(time.Duration(slot)*every + offset).Sub(clk.Now())):
		}
		err := l.Do(ctx, "job", func(ctx context.Context, tok fencing.Token) error {
			job(ctx, id, slot, tok)
			return nil
		}, tenure.OncePer(every))
		if err != nil && !errors.Is(err, tenure.ErrSlotTaken) {
			fmt.Fprintf(os.Stderr, "%s: slot %d: %v\n", id, slot, err)
		}
	}
}
