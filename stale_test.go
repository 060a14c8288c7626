package tenure_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/memlease"
)

// staleLog is a store with GetStale (answered as Get would be) that logs
// the calls of one candidate: "stale", "get" or "put", and what a read saw.
type staleLog struct {
	lease.Store
	mu  sync.Mutex
	ops []string
}

// note logs an op on the lease; the leader's reads of its standby record
// are not polls.
func (s *staleLog) note(name, op string) {
	if name != leaseName {
		return
	}
	s.mu.Lock()
	s.ops = append(s.ops, op)
	s.mu.Unlock()
}

func (s *staleLog) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	rec, v, err := s.Store.Get(ctx, name)
	s.note(name, "get"+seen(rec, err))
	return rec, v, err
}

func (s *staleLog) GetStale(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	rec, v, err := s.Store.Get(ctx, name)
	s.note(name, "stale"+seen(rec, err))
	return rec, v, err
}

func (s *staleLog) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	s.note(name, "put")
	return s.Store.Put(ctx, name, rec, expect)
}

func seen(rec lease.Record, err error) string {
	switch {
	case err != nil:
		return ":none"
	case rec.Released:
		return ":released"
	}
	return ":held"
}

// A follower polls with the store's stale reads, and reads strongly before
// it acts on a lease that a stale read shows free; with StrongPolls it
// never reads stale.
func TestStalePolls(t *testing.T) {
	for _, strong := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			mem := memlease.New()
			run := func(id string, s lease.Store, elected chan<- string) context.CancelFunc {
				c, err := tenure.New(tenure.Config{Lease: leaseName, Store: s, Runtime: tenure.Runtime{ID: id}, StrongPolls: strong,
					Callbacks: tenure.Callbacks{OnElected: func(ctx context.Context, _ tenure.Term) { elected <- id; <-ctx.Done() }}})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { _ = c.Run(ctx); close(done) }()
				return func() { cancel(); <-done }
			}
			elected := make(chan string, 2)
			stopA := run("a", &staleLog{Store: mem}, elected)
			<-elected
			b := &staleLog{Store: mem}
			stopB := run("b", b, elected)
			wait(time.Minute)
			stopA()
			if id := <-elected; id != "b" {
				t.Fatalf("%s elected", id)
			}
			stopB()
			b.mu.Lock()
			ops := b.ops
			b.mu.Unlock()
			stale := 0
			for _, op := range ops {
				if op == "stale:held" || op == "stale:released" {
					stale++
				}
			}
			switch {
			case strong && stale > 0:
				t.Fatalf("StrongPolls: %d stale reads: %v", stale, ops)
			case strong:
			case ops[0] != "get:held" || stale < 25:
				t.Fatalf("want a first strong read, then stale polls (one every 2s): %v", ops)
			default:
				// The acquire follows a strong read of the released record,
				// which follows the stale one that saw it first.
				i := len(ops) - 1
				for ops[i] != "put" {
					i--
				}
				for ops[i-1] == "put" { // the release after b's own term
					i--
				}
				if ops[i-2] != "stale:released" || ops[i-1] != "get:released" {
					t.Fatalf("before the takeover: %v", ops[max(i-4, 0):i+1])
				}
			}
		})
	}
}
