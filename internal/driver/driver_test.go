package driver

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/memlease"
)

// fx is Effects that records what the Driver asks, in order, and runs
// store calls when the test says, on a memlease.
type fx struct {
	t       *testing.T
	d       *Driver
	now     time.Time
	store   lease.Store
	log     []string
	ops     []election.Op
	wake    time.Time
	release time.Duration
	barrier []Barrier
	snaps   int
	reached bool // answer every barrier at once, as a host with no callbacks
}

func (f *fx) Now() time.Time { return f.now }
func (f *fx) Send(op election.Op) {
	f.ops = append(f.ops, op)
	f.log = append(f.log, fmt.Sprintf("send %v", kind(op)))
}
func (f *fx) Cancel(id uint64)             { f.log = append(f.log, "cancel") }
func (f *fx) Wake(at time.Time)            { f.wake = at }
func (f *fx) ReleaseTimer(d time.Duration) { f.release = d; f.log = append(f.log, "release timer") }
func (f *fx) Publish(Snapshot)             { f.snaps++ }
func (f *fx) Elected(election.Term)        { f.log = append(f.log, "elected") }
func (f *fx) Demoted(_ election.Term, r election.Reason) {
	f.log = append(f.log, "demoted: "+r.String())
}
func (f *fx) LeaderChanged(election.Leader) {}
func (f *fx) Anomaly(error)                 {}
func (f *fx) Barrier(b Barrier) {
	f.log = append(f.log, fmt.Sprintf("barrier %d", b))
	if f.reached {
		f.d.Reached(b)
		return
	}
	f.barrier = append(f.barrier, b)
}

func kind(op election.Op) string {
	switch {
	case op.Kind == election.OpGet:
		return "get"
	case op.Record.Released:
		return "release"
	}
	return "put"
}

func newFx(t *testing.T, store lease.Store) *fx {
	f := &fx{t: t, now: time.Unix(1e9, 0), store: store, reached: true}
	m, err := election.New(election.Config{ID: "a", Timing: election.Timing{}.WithDefaults(), Rand: rand.New(rand.NewPCG(1, 2))})
	if err != nil {
		t.Fatal(err)
	}
	f.d = New(m, f, 5*time.Second)
	return f
}

// answer runs the first waiting store call on the store and hands the
// Driver its result; the error returned is Result's.
func (f *fx) answer() error {
	f.t.Helper()
	if len(f.ops) == 0 {
		f.t.Fatal("no store call waits")
	}
	op := f.ops[0]
	f.ops = f.ops[1:]
	res := election.Result{ID: op.ID, Record: op.Record}
	if op.Kind == election.OpGet {
		res.Record, res.Version, res.Err = f.store.Get(context.Background(), "job")
	} else {
		res.Version, res.Err = f.store.Put(context.Background(), "job", op.Record, op.Expect)
	}
	return f.d.Result(res)
}

// elect starts the Driver and answers its calls until it leads.
func (f *fx) elect() {
	f.t.Helper()
	f.d.Start()
	for i := 0; !slices.Contains(f.log, "elected"); i++ {
		if i > 10 {
			f.t.Fatalf("not elected: %v", f.log)
		}
		if len(f.ops) == 0 {
			f.now = f.wake
			f.d.Tick()
			continue
		}
		if err := f.answer(); err != nil {
			f.t.Fatal(err)
		}
	}
}

// Stop ends the term, and only once the callbacks queued before it have
// returned (the Drained barrier) does the release go out, bounded by the
// release timer; the run is done once the release is confirmed.
func TestStopDemotesThenReleasesAfterDrained(t *testing.T) {
	f := newFx(t, memlease.New())
	f.elect()
	f.reached = false
	f.log = nil
	f.d.Stop()
	if want := []string{"demoted: shut down", fmt.Sprintf("barrier %d", Drained)}; !slices.Equal(f.log, want) {
		t.Fatalf("Stop: %v, want %v", f.log, want)
	}
	if len(f.ops) != 0 || f.d.Done() {
		t.Fatalf("released before the callbacks drained: ops %v, done %v", f.ops, f.d.Done())
	}
	f.d.Reached(Drained)
	if f.release != 5*time.Second || len(f.ops) != 1 || kind(f.ops[0]) != "release" {
		t.Fatalf("after Drained: release timer %v, ops %v; want the release, bounded by 5s", f.release, f.ops)
	}
	if err := f.answer(); err != nil || !f.d.Done() || f.d.GaveUp() {
		t.Fatalf("after the release: %v, done %v, gave up %v", err, f.d.Done(), f.d.GaveUp())
	}
}

// GiveUp (the release timer) ends a release that got no answer.
func TestGiveUpEndsAnUnansweredRelease(t *testing.T) {
	f := newFx(t, memlease.New())
	f.elect()
	f.d.Stop()
	f.d.GiveUp()
	if !f.d.Done() || !f.d.GaveUp() {
		t.Fatalf("done %v, gave up %v", f.d.Done(), f.d.GaveUp())
	}
}

// Keep: Stop ends the term and the run without giving the lease back.
func TestKeepGivesNothingBack(t *testing.T) {
	store := memlease.New()
	f := newFx(t, store)
	f.d.Keep()
	f.elect()
	f.d.Stop()
	if !f.d.Done() || len(f.ops) != 0 {
		t.Fatalf("done %v, calls %v: want the run over with no release", f.d.Done(), f.ops)
	}
	if rec, _, err := store.Get(context.Background(), "job"); err != nil || rec.Released {
		t.Fatalf("the record: %+v, %v; want it held", rec, err)
	}
}

// A term that ends while running holds campaigning back until the Held
// barrier is reached (its callbacks returned).
func TestHeldBarrierAfterDemotion(t *testing.T) {
	store := memlease.New()
	f := newFx(t, store)
	f.elect()
	f.reached = false
	// Another takes the lease: the next renewal conflicts.
	rec, ver, _ := store.Get(context.Background(), "job")
	rec.Holder, rec.Nonce, rec.Token = "b", "b", rec.Token+1
	if _, err := store.Put(context.Background(), "job", rec, ver); err != nil {
		t.Fatal(err)
	}
	for len(f.ops) == 0 {
		f.now = f.wake
		f.d.Tick()
	}
	f.log = nil
	if err := f.answer(); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(f.log, "demoted: lost to another holder") || !slices.Contains(f.barrier, Held) {
		t.Fatalf("after the conflict: %v, barriers %v", f.log, f.barrier)
	}
	if _, held := f.d.Held(); !held {
		t.Fatal("the Driver does not hold campaigning back before the Held barrier")
	}
	f.d.Reached(Held)
	if _, held := f.d.Held(); held {
		t.Fatal("still held back after the Held barrier")
	}
}

// The first answer of a run that is a permanent error is returned, and the
// run is over; a not-found counts as an answer, after which the same error
// on a read is passed to the Machine instead.
func TestResultPermanentAtFirstAnswer(t *testing.T) {
	perm := lease.Permanent(errors.New("access denied"))
	f := newFx(t, memlease.New())
	f.d.Start()
	op := f.ops[0]
	if err := f.d.Result(election.Result{ID: op.ID, Err: perm}); !errors.Is(err, lease.ErrPermanent) || !f.d.Done() {
		t.Fatalf("Result of a permanent error first: %v, done %v", err, f.d.Done())
	}

	// Another holds the lease: the first read answers, and a follower polls.
	store := memlease.New()
	if _, err := store.Put(context.Background(), "job", lease.Record{Holder: "b", Token: 1, Duration: time.Hour, Nonce: "n"}, lease.NoVersion); err != nil {
		t.Fatal(err)
	}
	f = newFx(t, store)
	f.d.Start()
	if err := f.answer(); err != nil {
		t.Fatal(err)
	}
	for len(f.ops) == 0 {
		f.now = f.wake
		f.d.Tick()
	}
	op = f.ops[0]
	if err := f.d.Result(election.Result{ID: op.ID, Err: perm}); err != nil || f.d.Done() {
		t.Fatalf("a permanent error on a poll after a read was answered: %v, done %v; want it retried", err, f.d.Done())
	}
}

// A not-found proves that reads work, and a conflict that writes do: a
// permanent error after either is retried, not the end of the run.
func TestNotFoundAndConflictCountAsAnswers(t *testing.T) {
	perm := lease.Permanent(errors.New("access denied"))
	next := func(f *fx) election.Op {
		t.Helper()
		for i := 0; len(f.ops) == 0; i++ {
			if i > 100 {
				t.Fatalf("no store call: %v", f.log)
			}
			f.now = f.wake
			f.d.Tick()
		}
		op := f.ops[0]
		f.ops = f.ops[1:]
		return op
	}

	// The first read finds no record; the takeover's outcome is unknown, so
	// the Machine reads again: a permanent error there is retried.
	f := newFx(t, memlease.New())
	f.d.Start()
	if op := next(f); op.Kind != election.OpGet {
		t.Fatalf("first call %s", kind(op))
	} else if err := f.d.Result(election.Result{ID: op.ID, Err: lease.NotFound("job")}); err != nil {
		t.Fatal(err)
	}
	op := next(f)
	if err := f.d.Result(election.Result{ID: op.ID, Err: errors.New("connection reset")}); err != nil {
		t.Fatal(err)
	}
	if op = next(f); op.Kind != election.OpGet {
		t.Fatalf("after a takeover of unknown outcome: %s, want a read", kind(op))
	}
	if err := f.d.Result(election.Result{ID: op.ID, Err: perm}); err != nil || f.d.Done() {
		t.Fatalf("a permanent error on a read after a not-found: %v, done %v; want it retried", err, f.d.Done())
	}

	// A takeover refused by a conflict proves writes: a permanent error on
	// the next write is retried.
	f = newFx(t, memlease.New())
	f.d.Start()
	if err := f.d.Result(election.Result{ID: next(f).ID, Err: lease.NotFound("job")}); err != nil {
		t.Fatal(err)
	}
	if err := f.d.Result(election.Result{ID: next(f).ID, Err: lease.Conflict("job")}); err != nil {
		t.Fatal(err)
	}
	for op = next(f); op.Kind != election.OpPut; op = next(f) {
		if err := f.d.Result(election.Result{ID: op.ID, Err: lease.NotFound("job")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.d.Result(election.Result{ID: op.ID, Err: perm}); err != nil || f.d.Done() {
		t.Fatalf("a permanent error on a write after a conflict: %v, done %v; want it retried", err, f.d.Done())
	}
}

// Publish comes after the first step and after every step that changed
// what the Machine knows, not after one that did not (a renewal).
func TestPublishOnlyOnChange(t *testing.T) {
	f := newFx(t, memlease.New())
	f.elect()
	before := f.snaps
	for range 3 { // renewals: the term goes on unchanged but for its deadline
		for len(f.ops) == 0 {
			f.now = f.wake
			f.d.Tick()
		}
		if err := f.answer(); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.snaps - before; got != 3 {
		t.Fatalf("%d publishes for 3 renewals, want 3 (each moves the deadline)", got)
	}
	f.snaps = 0
	f.now = f.now.Add(time.Millisecond)
	f.d.Tick() // nothing is due: nothing changes
	if f.snaps != 0 {
		t.Fatalf("%d publishes for a step that changed nothing", f.snaps)
	}
	if !strings.Contains(strings.Join(f.log, ","), "elected") {
		t.Fatal("never elected")
	}
}
