package tenure_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease/memlease"
)

// TestLeaderAddr: a follower and a Watch learn the leader's Addr from the
// record, with the payload intact; once the leader is cut off, the
// follower drops it before it takes over, and the Watch within a lease and
// a poll of its last sight of a renewal.
func TestLeaderAddr(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		mem := memlease.New()
		timing := tenure.Timing{LeaseDuration: 10 * time.Second}
		a := &cutStore{Store: mem}
		leader, err := tenure.New(tenure.Config{Lease: "svc", Store: a, Addr: "10.0.0.1:8080", Payload: []byte("v1"), Timing: timing, Runtime: tenure.Runtime{ID: "a"}})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = leader.Run(ctx) })
		time.Sleep(time.Second)
		follower, err := tenure.New(tenure.Config{Lease: "svc", Store: mem, Addr: "10.0.0.2:8080", Timing: timing, Runtime: tenure.Runtime{ID: "b"}})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = follower.Run(ctx) })
		var seen []tenure.Observation
		var mu sync.Mutex
		wg.Go(func() {
			_ = tenure.Watch(ctx, tenure.WatchConfig{Lease: "svc", Store: mem, Timing: tenure.Timing{PollInterval: time.Second}}, func(o tenure.Observation) {
				mu.Lock()
				seen = append(seen, o)
				mu.Unlock()
			})
		})
		last := func() tenure.Observation {
			mu.Lock()
			defer mu.Unlock()
			return seen[len(seen)-1]
		}
		time.Sleep(5 * time.Second)
		for _, st := range []tenure.Status{leader.Status(), follower.Status()} {
			if l := st.Leader; l.Holder != "a" || l.Addr != "10.0.0.1:8080" || string(l.Payload) != "v1" {
				t.Fatalf("leader %+v", l)
			}
		}
		if o := last(); o.Addr != "10.0.0.1:8080" || string(o.Payload) != "v1" {
			t.Fatalf("watch: %+v", o)
		}

		// Cut off, a stops renewing. The follower drops a's address a lease
		// after its own first sight of a's last record, before it can take
		// over (a lease and the drift bound after that sight). The Watch
		// drops it a lease after its own first sight, which may come a poll
		// (1s) later: within a lease, a poll and a renewal of the cut.
		a.cut.Store(true)
		cut := time.Now()
		watchGone := time.Duration(-1)
		for follower.Status().Leader.Addr != "" {
			if st := follower.Status(); st.Leading || st.Leader.Holder != "a" || time.Since(cut) > 12*time.Second+time.Millisecond {
				t.Fatalf("%v after the cut, the follower still gives the address: %+v", time.Since(cut), st)
			}
			if o := last(); o.Addr != "10.0.0.1:8080" && watchGone < 0 {
				watchGone = time.Since(cut)
			}
			time.Sleep(time.Millisecond)
		}
		for watchGone < 0 {
			if o := last(); o.Addr != "10.0.0.1:8080" {
				watchGone = time.Since(cut)
			} else if time.Since(cut) > 13*time.Second+time.Millisecond {
				t.Fatalf("%v after the cut, the watch still gives a's address: %+v", time.Since(cut), o)
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(12 * time.Second)
		if st := follower.Status(); !st.Leading || st.Leader.Addr != "10.0.0.2:8080" {
			t.Fatalf("b, after taking over: %+v", st)
		}
	})
}

func TestAddrValidated(t *testing.T) {
	for _, c := range []tenure.Config{
		{Addr: "0.0.0.0:80"},
		{Addr: "no-port"},
		{Payload: []byte{0xff, 'x'}},
	} {
		c.Lease, c.Store = "svc", memlease.New()
		var fe *election.FieldError
		if err := c.Validate(); !errors.As(err, &fe) || fe.Field != "Addr" {
			t.Errorf("%+v: %v", c, err)
		}
	}
}
