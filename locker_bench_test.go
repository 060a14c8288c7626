package tenure_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/memlease"
)

// countingStore counts the writes that reach a store, and closes reached
// once they number target.
type countingStore struct {
	lease.Store
	puts    atomic.Int64
	target  atomic.Int64
	reached atomic.Pointer[chan struct{}]
}

func (c *countingStore) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	if n := c.puts.Add(1); n == c.target.Load() {
		if ch := c.reached.Load(); ch != nil {
			close(*ch)
		}
	}
	return c.Store.Put(ctx, name, rec, expect)
}

// renewalRate waits until every one of n locks has been renewed twice, by
// count, and returns the writes per second meanwhile.
func renewalRate(store *countingStore, n int) float64 {
	start, from := time.Now(), store.puts.Load()
	ch := make(chan struct{})
	store.reached.Store(&ch)
	store.target.Store(from + 2*int64(n))
	<-ch
	return float64(2*n) / time.Since(start).Seconds()
}

// recordBytes returns the heap that n lease records take in a memlease
// store, per record: what a held lock costs the store, not the Locker.
func recordBytes(n int) float64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s := memlease.New()
	rec := lease.Record{Holder: "bench", Token: 1767225600000, Duration: time.Second, Nonce: "0123456789abcdef", WrittenAt: time.Now().UTC()}
	for i := range n {
		if _, err := s.Put(context.Background(), fmt.Sprintf("bench/%d", i), rec, lease.NoVersion); err != nil {
			panic(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// BenchmarkLocker10k holds 10,000 locks in one Locker on memlease, in real
// time, and reports the goroutines and heap per held lock (in all, and
// beyond the lock's record in the store), the renewals per second, and the
// time to take and to give back all of them. With the default 10s lease
// (renewals every 2s) the loop is mostly idle; with a 1s lease (every
// 200ms) renewals come as fast as one loop carries them out, and the
// calls waiting their turn count in the heap.
//
//	go test -run '^$' -bench Locker10k -benchtime 1x .
func BenchmarkLocker10k(b *testing.B) {
	for _, ttl := range []time.Duration{10 * time.Second, time.Second} {
		b.Run("lease="+ttl.String(), func(b *testing.B) { benchLocker(b, ttl, false) })
	}
	b.Run("lease=10s/fair", func(b *testing.B) { benchLocker(b, 10*time.Second, true) })
}

// benchLocker: fair takes each lock with Lock(Fair()), through its queue,
// rather than with TryLock; the store then keeps two records per lock, the
// lock's and its (empty) queue's.
func benchLocker(b *testing.B, ttl time.Duration, fair bool) {
	const n = 10_000
	perRecord := recordBytes(n)
	if fair {
		perRecord *= 2
	}
	for range b.N {
		store := &countingStore{Store: memlease.New()}
		l, err := tenure.NewLocker(tenure.LockerConfig{Store: store, Runtime: tenure.Runtime{ID: "bench"}, Timing: tenure.Timing{LeaseDuration: ttl}})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		held := make([]*tenure.Lock, n) // the caller's, not the Locker's
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		start := time.Now()
		for i := range held {
			name := fmt.Sprintf("bench/%d", i)
			if fair {
				held[i], err = l.Lock(ctx, name, tenure.Fair())
			} else {
				held[i], err = l.TryLock(ctx, name)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		took := time.Since(start)
		renewals := renewalRate(store, n)
		runtime.GC()
		runtime.ReadMemStats(&after)
		goroutines := runtime.NumGoroutine() - g0
		for _, h := range held {
			if h.Context().Err() != nil {
				b.Fatalf("%s lost: %v", h.Name(), context.Cause(h.Context()))
			}
		}
		start = time.Now()
		for _, h := range held {
			if err := h.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
		released := time.Since(start)
		l.Close()
		perLock := float64(after.HeapAlloc-before.HeapAlloc) / n
		b.ReportMetric(perLock, "heap-B/lock")
		b.ReportMetric(perLock-perRecord, "heap-B/lock-beyond-record")
		b.ReportMetric(float64(goroutines), "goroutines")
		b.ReportMetric(renewals, "renewals/s")
		b.ReportMetric(took.Seconds(), "s-to-lock-all")
		b.ReportMetric(released.Seconds(), "s-to-unlock-all")
	}
}

// BenchmarkIntegrationLocker1k holds 1,000 locks in one Locker on DynamoDB
// Local (the default 10s lease, renewals every 2s) through two rounds of
// renewals and reports the same figures, and how many locks were lost.
//
//	scripts/testservers.sh run -- go test -run '^$' -bench IntegrationLocker1k -benchtime 1x .
func BenchmarkIntegrationLocker1k(b *testing.B) {
	const n = 1_000
	for range b.N {
		_, _, s := dynamoStore(b, "tenure-bench-locks")
		store := &countingStore{Store: s}
		l, err := tenure.NewLocker(tenure.LockerConfig{Store: store, Runtime: tenure.Runtime{ID: "bench"}, Timing: tenure.Timing{LeaseDuration: 10 * time.Second}})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		g0 := runtime.NumGoroutine()
		start := time.Now()
		held := make([]*tenure.Lock, n)
		for i := range held {
			if held[i], err = l.TryLock(ctx, fmt.Sprintf("bench/%d", i)); err != nil {
				b.Fatal(err)
			}
		}
		took := time.Since(start)
		renewals := renewalRate(store, n)
		goroutines := runtime.NumGoroutine() - g0
		lost := 0
		for _, h := range held {
			if h.Context().Err() != nil {
				lost++
			}
		}
		start = time.Now()
		for _, h := range held {
			_ = h.Unlock(ctx)
		}
		released := time.Since(start)
		l.Close()
		b.ReportMetric(float64(goroutines), "goroutines")
		b.ReportMetric(renewals, "renewals/s")
		b.ReportMetric(float64(lost), "lost")
		b.ReportMetric(took.Seconds(), "s-to-lock-all")
		b.ReportMetric(released.Seconds(), "s-to-unlock-all")
	}
}
