package lockcore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/leasetest"
	"github.com/tenure-go/tenure/lease/memlease"
)

// semHost is a SemHost whose store calls run, in order, when the test
// drains them.
type semHost struct {
	t       *testing.T
	s       *Sem
	now     time.Time
	store   lease.Store
	calls   []semCall
	granted []int
	pair    bool // hold a slot's write back until another's comes
	refused []error
	refuses bool // a refusal is what the test looks for
	retired bool
}

// next takes the first waiting call; with pair, a write on a slot waits
// until a write on another slot waits too, and then both run.
func (h *semHost) next() (semCall, bool) {
	puts := 0
	for _, c := range h.calls {
		if c.rec == RecLock && c.op.Kind == election.OpPut {
			puts++
		}
	}
	for i, c := range h.calls {
		if !h.pair || puts >= 2 || c.rec != RecLock || c.op.Kind != election.OpPut {
			h.calls = append(h.calls[:i:i], h.calls[i+1:]...)
			return c, true
		}
	}
	return semCall{}, false
}

type semCall struct {
	slot, rec int
	op        election.Op
}

func (h *semHost) Now() time.Time { return h.now }
func (h *semHost) Call(slot int, op election.Op, rec int) {
	h.calls = append(h.calls, semCall{slot, rec, op})
}
func (h *semHost) Cancel(int)                        {}
func (h *semHost) Log(slog.Level, string, ...any)    {}
func (h *semHost) Granted(slot int, _ election.Term) { h.granted = append(h.granted, slot) }
func (h *semHost) Busy([]election.Leader)            { h.t.Error("busy") }
func (h *semHost) Refused(err error) {
	if !h.refuses {
		h.t.Errorf("refused: %v", err)
	}
	h.refused = append(h.refused, err)
}
func (h *semHost) Publish(driver.Snapshot)              {}
func (h *semHost) Ended(election.Term, election.Reason) {}
func (h *semHost) Reschedule()                          {}
func (h *semHost) Retired()                             { h.retired = true }

// run runs the waiting calls, and those they lead to, then the timers
// due by until.
func (h *semHost) run(until time.Time) {
	for {
		for {
			c, ok := h.next()
			if !ok {
				break
			}
			name := SemRecordName(h.s.name, c.slot, c.rec)
			res := election.Result{ID: c.op.ID, Record: c.op.Record}
			if c.op.Kind == election.OpGet {
				res.Record, res.Version, res.Err = h.store.Get(context.Background(), name)
			} else {
				res.Version, res.Err = h.store.Put(context.Background(), name, c.op.Record, c.op.Expect)
			}
			h.s.Result(c.slot, c.rec, res, c.op.Kind == election.OpPut)
		}
		d := h.s.Due()
		if d.IsZero() || d.After(until) {
			h.now = until
			return
		}
		if d.After(h.now) {
			h.now = d
		}
		h.s.Fire(h.now)
	}
}

// Two slots freed at once: a waiter that takes both keeps the first and
// gives the other back at once, so that it is free for the next caller.
func TestSemGivesBackASecondSlot(t *testing.T) {
	ctx := context.Background()
	store := memlease.New()
	now := time.Unix(1e9, 0)
	vers := make([]lease.Version, 2)
	// The count record stands (holders of 2 slots wrote it), so that the
	// caller waits on the slots rather than for them to drain.
	if _, err := store.Put(ctx, "pool"+SlotsSuffix, lease.Record{Holder: slotsHolder, Token: 1, Duration: 10 * time.Second, Nonce: "c", Payload: []byte("2")}, lease.NoVersion); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		v, err := store.Put(ctx, SlotName("pool", i), lease.Record{Holder: "x", Token: 5, Duration: 10 * time.Second, Nonce: "x"}, lease.NoVersion)
		if err != nil {
			t.Fatal(err)
		}
		vers[i] = v
	}
	h := &semHost{t: t, now: now, store: store, pair: true}
	cfg := election.Config{ID: "w", Timing: election.Timing{}.WithDefaults(), Rand: rand.New(rand.NewPCG(1, 2))}
	h.s = new(Sem)
	if err := h.s.Init(h, "pool", 2, &cfg, false, false, nil); err != nil {
		t.Fatal(err)
	}
	h.s.Start()
	h.run(now.Add(time.Second)) // both slots held: it waits on both
	for i := range 2 {          // both given back at once
		if _, err := store.Put(ctx, SlotName("pool", i), lease.Record{Holder: "x", Token: 5, Duration: 10 * time.Second, Nonce: "y", Released: true}, vers[i]); err != nil {
			t.Fatal(err)
		}
	}
	h.run(now.Add(10 * time.Second))
	if len(h.granted) != 1 {
		t.Fatalf("granted %v, want one slot", h.granted)
	}
	other := 1 - h.granted[0]
	rec, _, err := store.Get(ctx, SlotName("pool", other))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Holder == "w" && !rec.Released {
		t.Fatalf("slot %d still held by the waiter beside slot %d: %+v", other, h.granted[0], rec)
	}
	took := 0
	for i := range 2 {
		if rec, _, _ := store.Get(ctx, SlotName("pool", i)); rec.Holder == "w" {
			took++
		}
	}
	if took != 2 {
		t.Fatalf("the waiter took %d slots; the test wants both taken at once", took)
	}
}

// A waiting Lock fails fast where retrying cannot help (the count record
// or a slot refused for good), and waits on the good slots where one slot's
// record is unreadable.
func TestSemWaitFailsFastOrWaits(t *testing.T) {
	ctx := context.Background()
	denied := fmt.Errorf("%w: access denied", lease.ErrPermanent)
	invalid := &lease.RecordError{Name: SlotName("pool", 1), Field: "holder", Reason: "garbage"}
	for _, c := range []struct {
		name     string
		get, put func(name string) error
		wantErr  error // nil: granted
	}{
		{"count record denied", func(n string) error {
			if n == "pool"+SlotsSuffix {
				return denied
			}
			return nil
		}, nil, lease.ErrPermanent},
		{"slot writes denied", nil, func(n string) error {
			if n != "pool"+SlotsSuffix {
				return denied
			}
			return nil
		}, lease.ErrPermanent},
		{"one slot unreadable", func(n string) error {
			if n == SlotName("pool", 1) {
				return invalid
			}
			return nil
		}, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := memlease.New()
			now := time.Unix(1e9, 0)
			// Slot 0 is held by x (for 10s unrenewed), who leaves 5s in.
			ver, err := mem.Put(ctx, SlotName("pool", 0), lease.Record{Holder: "x", Token: 5, Duration: 10 * time.Second, Nonce: "x"}, lease.NoVersion)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := mem.Put(ctx, "pool"+SlotsSuffix, lease.Record{Holder: slotsHolder, Token: 1, Duration: 10 * time.Second, Nonce: "c", Payload: []byte("2")}, lease.NoVersion); err != nil {
				t.Fatal(err)
			}
			failing := leasetest.NewFaults(mem)
			failing.SetHook(func(op, name string) error {
				if f := map[string]func(string) error{"get": c.get, "put": c.put}[op]; f != nil {
					return f(name)
				}
				return nil
			})
			h := &semHost{t: t, now: now, store: failing, refuses: c.wantErr != nil}
			cfg := election.Config{ID: "w", Timing: election.Timing{}.WithDefaults(), Rand: rand.New(rand.NewPCG(1, 2))}
			h.s = new(Sem)
			if err := h.s.Init(h, "pool", 2, &cfg, false, false, nil); err != nil {
				t.Fatal(err)
			}
			h.s.Start()
			h.run(now.Add(5 * time.Second))
			if c.wantErr != nil {
				if len(h.refused) != 1 || !errors.Is(h.refused[0], c.wantErr) || !h.retired {
					t.Fatalf("after 5s: refused %v (retired %v), want one refusal with %v", h.refused, h.retired, c.wantErr)
				}
				return
			}
			if len(h.refused) > 0 || len(h.granted) > 0 {
				t.Fatalf("after 5s, slot 0 held by x: refused %v, granted %v; want it waiting", h.refused, h.granted)
			}
			if _, err := mem.Put(ctx, SlotName("pool", 0), lease.Record{Holder: "x", Token: 5, Duration: 10 * time.Second, Nonce: "y", Released: true}, ver); err != nil {
				t.Fatal(err)
			}
			h.run(now.Add(10 * time.Second))
			if len(h.granted) != 1 || h.granted[0] != 0 {
				t.Fatalf("after x left slot 0: granted %v, refused %v; want slot 0", h.granted, h.refused)
			}
		})
	}
}

// A count record that the semaphore did not write (another holder, even
// with a number in it) fixes nothing: the call is refused, saying so.
func TestSemRefusesAForeignCountRecord(t *testing.T) {
	ctx := context.Background()
	store := memlease.New()
	if _, err := store.Put(ctx, "pool"+SlotsSuffix, lease.Record{Holder: "someone", Token: 1, Duration: 10 * time.Second, Nonce: "c", Payload: []byte("2")}, lease.NoVersion); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1e9, 0)
	h := &semHost{t: t, now: now, store: store, refuses: true}
	cfg := election.Config{ID: "w", Timing: election.Timing{}.WithDefaults(), Rand: rand.New(rand.NewPCG(1, 2))}
	h.s = new(Sem)
	if err := h.s.Init(h, "pool", 2, &cfg, false, false, nil); err != nil {
		t.Fatal(err)
	}
	h.s.Start()
	h.run(now.Add(time.Second))
	if len(h.granted) != 0 || len(h.refused) != 1 || !strings.Contains(h.refused[0].Error(), `by "someone", not a number of slots by "tenure-slots"`) {
		t.Fatalf("granted %v, refused %v; want it refused, naming the foreign holder", h.granted, h.refused)
	}
}

// A semaphore whose count record is gone drains before writing it: a slot
// record that stays unchanged is waited out for its ttl stretched by
// MaxDrift, as a lock's silent holder is, since a holder whose clock runs
// slow still believes at ttl.
func TestSemDrainWaitsOutDrift(t *testing.T) {
	ctx := context.Background()
	store := memlease.New()
	now := time.Unix(1e9, 0)
	// Slot 0 is held by a silent holder; the count record is gone.
	if _, err := store.Put(ctx, SlotName("pool", 0), lease.Record{Holder: "x", Token: 5, Duration: 10 * time.Second, Nonce: "x"}, lease.NoVersion); err != nil {
		t.Fatal(err)
	}
	h := &semHost{t: t, now: now, store: store}
	timing := election.Timing{MaxDrift: 0.1}.WithDefaults() // ttl×(1+ρ): 11s of a 10s lease
	cfg := election.Config{ID: "w", Timing: timing, Rand: rand.New(rand.NewPCG(1, 2))}
	h.s = new(Sem)
	if err := h.s.Init(h, "pool", 2, &cfg, false, false, nil); err != nil {
		t.Fatal(err)
	}
	h.s.Start()
	h.run(now.Add(10*time.Second + 900*time.Millisecond))
	if len(h.granted) != 0 {
		t.Fatalf("granted slot %v by %v: the drain waited out slot 0's 10s, not 11s", h.granted, h.now.Sub(now))
	}
	if _, _, err := store.Get(ctx, "pool"+SlotsSuffix); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("the count record was written before slot 0 was waited out: %v", err)
	}
	h.run(now.Add(15 * time.Second))
	if len(h.granted) != 1 || h.granted[0] != 1 {
		t.Fatalf("granted %v once slot 0 was waited out, want slot 1", h.granted)
	}
}
