package tenure_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/lockcore"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/leasetest"
	"github.com/tenure-go/tenure/lease/memlease"
)

func newLocker(t *testing.T, store lease.Store, id string) *tenure.Locker {
	t.Helper()
	l, err := tenure.NewLocker(tenure.LockerConfig{Store: store, Runtime: tenure.Runtime{ID: id}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TryLock takes a free lock at once and refuses a held one at once, naming
// the holder; Unlock gives it back with its token, and the next holder's
// token is the next one.
func TestTryLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memlease.New()
		a, b := newLocker(t, store, "a"), newLocker(t, store, "b")
		start := time.Now()
		h, err := a.TryLock(ctx, "reports/2026-11-23", tenure.WithPayload([]byte("addr-a")))
		if err != nil || time.Since(start) != 0 {
			t.Fatalf("TryLock of a free lock: %v after %v", err, time.Since(start))
		}
		if h.Token() < fencing.Token(start.UnixMilli()) || h.Context().Err() != nil {
			t.Fatalf("token %d, context %v", h.Token(), h.Context().Err())
		}
		_, err = b.TryLock(ctx, "reports/2026-11-23")
		var le *tenure.LockedError
		if !errors.Is(err, tenure.ErrLocked) || !errors.As(err, &le) || le.Holder != "a" || le.Token != h.Token() || string(le.Payload) != "addr-a" || time.Since(start) != 0 {
			t.Fatalf("TryLock of a held lock: %v", err)
		}
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if h.Context().Err() == nil {
			t.Fatal("the lock's context outlives Unlock")
		}
		rec, _, err := store.Get(ctx, "reports/2026-11-23")
		if err != nil || !rec.Released || rec.Token != uint64(h.Token()) {
			t.Fatalf("after Unlock: %+v, %v", rec, err)
		}
		h2, err := b.TryLock(ctx, "reports/2026-11-23")
		if err != nil || h2.Token() != h.Token()+1 {
			t.Fatalf("next holder: %v, token %v after %v", err, h2, h.Token())
		}
	})
}

// Lock waits: until the holder unlocks (within a poll interval), or until
// ctx's deadline (ctx's error), or, from a holder gone silent, for its
// lease stretched by ρ.
func TestLockWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := memlease.New()
		silent := leasetest.NewFaults(mem) // the waiter's link to the store
		a, waiter := newLocker(t, mem, "a"), newLocker(t, silent, "w")
		h, err := a.Lock(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		start := time.Now()
		if _, err := waiter.Lock(short, "job"); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 3*time.Second {
			t.Fatalf("Lock with a 3s deadline: %v after %v", err, time.Since(start))
		}
		go func() {
			wait(5 * time.Second)
			h.Unlock(ctx)
		}()
		start = time.Now()
		h2, err := waiter.Lock(ctx, "job")
		if waited := time.Since(start); err != nil || waited < 5*time.Second || waited > 5*time.Second+2*time.Second {
			t.Fatalf("Lock after an Unlock 5s later: %v after %v", err, waited)
		}
		// The waiter now goes silent (its store calls fail): a is taken
		// over only after the lease, stretched by ρ, and the silent
		// holder's context ends by its deadline.
		silent.FailAll()
		start = time.Now()
		h3, err := a.Lock(ctx, "job")
		if waited := time.Since(start); err != nil || waited < election.WaitBeforeTakeover(10*time.Second, 1e-3)-2*time.Second {
			t.Fatalf("Lock from a silent holder: %v after %v", err, waited)
		}
		if h2.Context().Err() == nil {
			t.Fatal("the silent holder's context is alive")
		}
		if h3.Token() <= h2.Token() {
			t.Fatalf("token %d after %d", h3.Token(), h2.Token())
		}
		silent.Heal()
	})
}

// One Locker holds many locks with one goroutine: they stay held, renewed,
// for minutes, and no goroutine is left per lock.
func TestManyLocksOneLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		l := newLocker(t, memlease.New(), "a")
		synctest.Wait()
		before := bubbleGoroutines()
		if before < 1 {
			t.Fatalf("%d goroutines in the bubble: the Locker's loop is not counted", before)
		}
		var held []*tenure.Lock
		for i := range 500 {
			h, err := l.TryLock(ctx, fmt.Sprintf("job/%d", i))
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, h)
		}
		wait(3 * time.Minute)
		synctest.Wait()
		if n := bubbleGoroutines(); n != before {
			t.Fatalf("%d goroutines with 500 locks held, %d before", n, before)
		}
		for _, h := range held {
			if h.Context().Err() != nil {
				t.Fatalf("%s lost after 3 minutes: %v", h.Name(), context.Cause(h.Context()))
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		for _, h := range held {
			if h.Context().Err() == nil {
				t.Fatalf("%s outlives Close", h.Name())
			}
		}
	})
}

// Two calls of one Locker for one name: TryLock is refused, naming this
// Locker; Lock waits in this process until the first unlocks.
func TestSameNameInOneLocker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		l := newLocker(t, memlease.New(), "a")
		h, err := l.Lock(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		var le *tenure.LockedError
		if _, err := l.TryLock(ctx, "job"); !errors.As(err, &le) || le.Holder != "a" || le.Token != h.Token() {
			t.Fatalf("TryLock of a name this Locker holds: %v", err)
		}
		got := make(chan *tenure.Lock)
		go func() {
			h2, err := l.Lock(ctx, "job")
			if err != nil {
				t.Error(err)
			}
			got <- h2
		}()
		wait(time.Minute)
		select {
		case <-got:
			t.Fatal("a second holder in one process")
		default:
		}
		start := time.Now()
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		h2 := <-got
		if time.Since(start) != 0 || h2.Token() != h.Token()+1 {
			t.Fatalf("second holder after %v with token %d", time.Since(start), h2.Token())
		}
	})
}

// Do runs its function under the lock and gives the lock back.
func TestDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memlease.New()
		l := newLocker(t, store, "a")
		boom := errors.New("boom")
		var ran fencing.Token
		err := l.Do(ctx, "job", func(ctx context.Context, tok fencing.Token) error {
			if f, ok := fencing.FromContext(ctx); !ok || f.Token != tok || f.Lease != "job" {
				t.Errorf("fence %+v", f)
			}
			ran = tok
			return boom
		})
		if !errors.Is(err, boom) || ran == 0 {
			t.Fatalf("Do = %v, ran with token %d", err, ran)
		}
		if rec, _, err := store.Get(ctx, "job"); err != nil || !rec.Released {
			t.Fatalf("after Do: %+v, %v", rec, err)
		}
	})
}

// A closed Locker refuses new calls, and a Lock waiting when it closes
// returns ErrClosed. Bad names and options are refused up front.
func TestLockerCloseAndErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memlease.New()
		a, b := newLocker(t, store, "a"), newLocker(t, store, "b")
		if _, err := a.Lock(ctx, "job"); err != nil {
			t.Fatal(err)
		}
		errc := make(chan error)
		go func() {
			_, err := b.Lock(ctx, "job")
			errc <- err
		}()
		wait(time.Second)
		b.Close()
		if err := <-errc; !errors.Is(err, tenure.ErrClosed) {
			t.Fatalf("a Lock waiting at Close: %v", err)
		}
		if _, err := b.TryLock(ctx, "other"); !errors.Is(err, tenure.ErrClosed) {
			t.Fatalf("TryLock after Close: %v", err)
		}
		if _, err := a.TryLock(ctx, "../x"); !errors.Is(err, lease.ErrInvalidName) {
			t.Fatalf("bad name: %v", err)
		}
		if _, err := a.TryLock(ctx, "x", tenure.WithPayload(make([]byte, lease.MaxPayloadLen+1))); err == nil {
			t.Fatal("oversized payload accepted")
		}
		if _, err := tenure.NewLocker(tenure.LockerConfig{}); err == nil {
			t.Fatal("NewLocker without a store")
		}
	})
}

// bubbleGoroutines counts the goroutines of the caller's synctest bubble:
// other tests' goroutines do not count.
func bubbleGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	blocks := strings.Split(string(buf), "\n\n")
	bubble := func(b string) string {
		header, _, _ := strings.Cut(b, "\n")
		_, after, ok := strings.Cut(header, "synctest bubble ")
		if !ok {
			return ""
		}
		return strings.TrimRightFunc(after, func(r rune) bool { return r < '0' || r > '9' })
	}
	mine := bubble(blocks[0])
	n := 0
	for _, b := range blocks[1:] {
		if mine != "" && bubble(b) == mine {
			n++
		}
	}
	return n
}

// TryLock does not wait out a record with this Locker's own ID left by an
// earlier process: it is held, as far as this process can tell.
func TestTryLockOwnIDFromEarlierProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memlease.New()
		earlier := newLocker(t, leasetest.NewFaults(store), "a")
		if _, err := earlier.TryLock(ctx, "job"); err != nil {
			t.Fatal(err)
		}
		later := newLocker(t, store, "a")
		start := time.Now()
		var le *tenure.LockedError
		if _, err := later.TryLock(ctx, "job"); !errors.As(err, &le) || le.Holder != "a" || time.Since(start) != 0 {
			t.Fatalf("TryLock: %v after %v", err, time.Since(start))
		}
	})
}

// gatedStore holds every call until open is closed, counting the calls in
// flight and the most at once.
type gatedStore struct {
	lease.Store
	open          chan struct{}
	inflight, top atomic.Int64
}

func (g *gatedStore) enter() {
	n := g.inflight.Add(1)
	for {
		if m := g.top.Load(); n <= m || g.top.CompareAndSwap(m, n) {
			break
		}
	}
	<-g.open
	g.inflight.Add(-1)
}

func (g *gatedStore) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	g.enter()
	return g.Store.Get(ctx, name)
}

func (g *gatedStore) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	g.enter()
	return g.Store.Put(ctx, name, rec, expect)
}

// TestLockerBoundsCallsInFlight: a Locker has at most 256 store calls in
// flight; the others wait their turn and all complete.
func TestLockerBoundsCallsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &gatedStore{Store: memlease.New(), open: make(chan struct{})}
		l := newLocker(t, store, "l")
		const n = 600
		errs := make(chan error, n)
		for i := range n {
			go func() {
				_, err := l.TryLock(context.Background(), fmt.Sprintf("bound/%d", i))
				errs <- err
			}()
		}
		synctest.Wait()
		if got := store.inflight.Load(); got != 256 {
			t.Fatalf("%d calls in flight with %d locks asked for, want 256", got, n)
		}
		close(store.open)
		for range n {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if got := store.top.Load(); got != 256 {
			t.Fatalf("at most %d calls at once, want 256", got)
		}
	})
}

// TestLockDeadlineNamesHolder: a Lock whose context ends while another
// holds the lock returns an error that wraps both the context's error and
// ErrLocked, naming the holder.
func TestLockDeadlineNamesHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlease.New()
		a, b := newLocker(t, store, "a"), newLocker(t, store, "b")
		h, err := a.TryLock(context.Background(), "x")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err = b.Lock(ctx, "x")
		var le *tenure.LockedError
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, tenure.ErrLocked) || !errors.As(err, &le) || le.Holder != "a" || le.Token != h.Token() {
			t.Fatalf("Lock past its deadline: %v; want DeadlineExceeded and a *LockedError naming a", err)
		}
	})
}

// TestNamesRefused: "::" names tenure's own records, and a fair lock's name
// must leave room for its queue's.
func TestNamesRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLocker(t, memlease.New(), "a")
		for _, c := range []struct {
			name string
			opts []tenure.LockOption
		}{{"jobs::queue", nil}, {strings.Repeat("n", 195), []tenure.LockOption{tenure.Fair()}}} {
			if _, err := l.Lock(context.Background(), c.name, c.opts...); !errors.Is(err, lease.ErrInvalidName) {
				t.Errorf("Lock(%.20q...): %v, want ErrInvalidName at once", c.name, err)
			}
		}
		if _, err := tenure.New(tenure.Config{Lease: "jobs::queue", Store: memlease.New()}); !errors.Is(err, lease.ErrInvalidName) {
			t.Errorf("New with lease jobs::queue: %v, want ErrInvalidName", err)
		}
	})
}

// garbageQueue is a store whose queue records no one can decode.
type garbageQueue struct{ lease.Store }

func (g garbageQueue) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	if strings.HasSuffix(name, "::queue") {
		return lease.Record{}, lease.NoVersion, &lease.RecordError{Name: name, Field: "file", Reason: "not JSON"}
	}
	return g.Store.Get(ctx, name)
}

// TestFairLockNeverJammed: a fair Lock of a free lock is taken whatever its
// queue holds: 64 entries of waiters that died (waited out, then dropped),
// a record no one can decode, or a valid one whose ticket counter is at
// 2^63-1 (the waiter goes on without the queue).
func TestFairLockNeverJammed(t *testing.T) {
	ghosts := make([]string, lockcore.MaxWaiters)
	for i := range ghosts {
		ghosts[i] = fmt.Sprintf("%d/%d", i+1, i)
	}
	for _, c := range []struct {
		name  string
		store func() lease.Store
		queue *lease.Record
	}{
		{"ghosts", func() lease.Store { return memlease.New() },
			&lease.Record{Holder: "tenure-queue", Token: lockcore.MaxWaiters + 1, Duration: 10 * time.Second, Nonce: "n", Payload: []byte(strings.Join(ghosts, " "))}},
		{"garbage", func() lease.Store { return garbageQueue{memlease.New()} }, nil},
		{"last-ticket", func() lease.Store { return memlease.New() },
			&lease.Record{Holder: "tenure-queue", Token: 1<<63 - 1, Duration: 10 * time.Second, Nonce: "n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := c.store()
				if c.queue != nil {
					if _, err := store.Put(context.Background(), "x::queue", *c.queue, lease.NoVersion); err != nil {
						t.Fatal(err)
					}
				}
				l := newLocker(t, store, "a")
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				h, err := l.Lock(ctx, "x", tenure.Fair())
				if err != nil {
					t.Fatalf("fair Lock of a free lock: %v", err)
				}
				_ = h.Unlock(context.Background())
			})
		})
	}
}
