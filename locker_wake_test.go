package tenure_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/memlease"
)

// TestLockerWakeUps runs on the real clock, with real UDP: a waiting Lock
// names itself in the lock's wake record, and the holder's Unlock wakes
// it; it reads at once and takes the lock. Polls are 45s apart or more,
// so that only the wake-up can explain a grant before the test's
// deadline; the test waits on events, not on time.
func TestLockerWakeUps(t *testing.T) {
	for _, fair := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "fair"}[fair], func(t *testing.T) {
			store := memlease.New()
			const waiting, woken = "waiting for a wake-up", "woken: reading the lock"
			logs := &logged{msgs: map[string]chan struct{}{waiting: make(chan struct{}), woken: make(chan struct{})}}
			locker := func(id string, lg *slog.Logger) *tenure.Locker {
				l, err := tenure.NewLocker(tenure.LockerConfig{
					Store: store, Runtime: tenure.Runtime{ID: id, WakeAddr: "127.0.0.1:0", Logger: lg},
					Timing: tenure.Timing{LeaseDuration: time.Minute, PollInterval: 50 * time.Second},
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
				return l
			}
			a, b := locker("a", nil), locker("b", slog.New(logs))
			if b.WakeAddr() == "" {
				t.Fatal("b publishes no wake-up address")
			}
			ctx := context.Background()
			held, err := a.Lock(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			var opts []tenure.LockOption
			if fair {
				opts = append(opts, tenure.Fair())
			}
			got := make(chan error, 1)
			go func() {
				h, err := b.Lock(ctx, "job", opts...)
				if err == nil {
					err = h.Unlock(ctx)
				}
				got <- err
			}()
			deadline := time.After(40 * time.Second)
			select {
			case <-logs.msgs[waiting]:
			case <-deadline:
				t.Fatal("b never named itself in the wake record")
			}
			if err := held.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatal(err)
				}
			case <-deadline:
				t.Fatal("b did not get the lock before its next poll: the wake-up did not arrive")
			}
			select {
			case <-logs.msgs[woken]:
			default:
				t.Fatal("b got the lock without a wake-up")
			}
		})
	}
}

// TestLockerWakeNameTooLong: a lock whose name leaves no room for its wake
// record is taken and given back without wake-ups, and no call is made on
// a record the store would refuse to name.
func TestLockerWakeNameTooLong(t *testing.T) {
	store := &names{Store: memlease.New()}
	l, err := tenure.NewLocker(tenure.LockerConfig{Store: store, Runtime: tenure.Runtime{ID: "a", WakeAddr: "127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	name := strings.Repeat("n", lease.MaxNameLen)
	h, err := l.Lock(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if bad := store.invalid.Load(); bad != 0 {
		t.Fatalf("%d calls on records with invalid names", bad)
	}
}

// names counts calls on records whose names are not valid.
type names struct {
	lease.Store
	invalid atomic.Int32
}

func (n *names) check(name string) {
	if lease.ValidateName(name) != nil {
		n.invalid.Add(1)
	}
}

func (n *names) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	n.check(name)
	return n.Store.Get(ctx, name)
}
