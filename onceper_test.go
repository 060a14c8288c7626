package tenure_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/lease/memlease"
)

// TestOncePerUnderSkew: three replicas fire 0, 0.8 and 1.6s into each 3s
// slot, each running a 0.2s job with OncePer: every slot runs exactly once,
// although the job is long over when the late replicas fire.
func TestOncePerUnderSkew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memlease.New()
		const every, slots = 3 * time.Second, 5
		// synctest's clock starts at midnight: slot k starts at 3k s.
		start := time.Now()
		var mu sync.Mutex
		ran := map[int64][]string{}
		var wg sync.WaitGroup
		for i, late := range []time.Duration{0, 800 * time.Millisecond, 1600 * time.Millisecond} {
			l := newLocker(t, store, string(rune('a'+i)))
			wg.Go(func() {
				for k := range slots {
					wait(time.Until(start.Add(time.Duration(k)*every + late)))
					err := l.Do(ctx, "nightly", func(context.Context, fencing.Token) error {
						mu.Lock()
						ran[int64(k)] = append(ran[int64(k)], l.ID())
						mu.Unlock()
						wait(200 * time.Millisecond)
						return nil
					}, tenure.OncePer(every))
					var le *tenure.LockedError
					switch {
					case err == nil:
					case errors.Is(err, tenure.ErrSlotTaken) && errors.Is(err, tenure.ErrLocked) && errors.As(err, &le):
					default:
						t.Errorf("%s, slot %d: %v", l.ID(), k, err)
					}
				}
			})
		}
		wg.Wait()
		for k := range int64(slots) {
			if len(ran[k]) != 1 {
				t.Errorf("slot %d ran %d times: %v", k, len(ran[k]), ran[k])
			}
		}
		// The slot's record is kept, not released: it covers the slot.
		rec, _, err := store.Get(ctx, "nightly/20000101T000000Z")
		if err != nil || rec.Released || rec.Duration < every {
			t.Errorf("slot 0's record: %+v, %v; want held with a lease of at least %v", rec, err, every)
		}
	})
}

// TestOncePerRefusesBadSettings: a slot is whole seconds up to a day, and
// never waited for in turn.
func TestOncePerRefusesBadSettings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLocker(t, memlease.New(), "a")
		for _, c := range []struct {
			every time.Duration
			opts  []tenure.LockOption
		}{
			{500 * time.Millisecond, nil}, {1500 * time.Millisecond, nil}, {25 * time.Hour, nil},
			{time.Minute, []tenure.LockOption{tenure.Fair()}},
		} {
			if _, err := l.Lock(context.Background(), "job", append(c.opts, tenure.OncePer(c.every))...); err == nil {
				t.Errorf("OncePer(%v) %d options: taken", c.every, len(c.opts))
			}
		}
	})
}

// wallClock is a clock whose Now is a monotonic reading far from the time
// of day, with the wall reading apart, as a simulator's.
type wallClock struct{ mono, wall time.Time }

func (c wallClock) Now() time.Time                         { return c.mono }
func (c wallClock) Wall() time.Time                        { return c.wall }
func (c wallClock) After(d time.Duration) <-chan time.Time { return make(chan time.Time, 1) }

// TestOncePerSlotIsTheWallClocks: the slot comes from the clock's Wall
// reading where it has one, not from Now.
func TestOncePerSlotIsTheWallClocks(t *testing.T) {
	ctx := context.Background()
	store := memlease.New()
	clk := wallClock{mono: time.Unix(3600, 0), wall: time.Date(2026, 11, 29, 12, 34, 56, 0, time.UTC)}
	l, err := tenure.NewLocker(tenure.LockerConfig{Store: store, Runtime: tenure.Runtime{ID: "a", Clock: clk}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.TryLock(ctx, "nightly", tenure.OncePer(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Get(ctx, "nightly/20261129T123400Z"); err != nil {
		t.Fatalf("the wall clock's slot: %v", err)
	}
}
