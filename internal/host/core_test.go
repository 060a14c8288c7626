package host

import (
	"slices"
	"testing"
	"time"

	"github.com/tenure-go/tenure/election"
)

// script is a Core's Calls that starts nothing: it notes what the Core
// asked, and the test answers when it chooses, as a simulator would.
type script struct {
	log     *[]string
	started []*Flight
}

func (s *script) Start(f *Flight) {
	s.started = append(s.started, f)
	*s.log = append(*s.log, "start "+f.name)
}
func (s *script) Abandon(f *Flight) { *s.log = append(*s.log, "abandon "+f.name) }

// A Core steps without a goroutine or a clock of its own: entries fire at
// the instant given, earliest first and, due at once, in the order they
// first had a Due; calls beyond MaxCalls wait in order, one cancelled
// while waiting is never started, one cancelled once started is
// abandoned and still answered; a write is stamped with the Core's time.
func TestCoreSteps(t *testing.T) {
	var log []string
	t0 := time.Unix(1000, 0)
	now := t0
	calls := &script{log: &log}
	c := NewCore(func() time.Time { return now }, calls, 2)
	a := &entry{name: "a", due: t0.Add(2 * time.Second), log: &log}
	b := &entry{name: "b", due: t0.Add(time.Second), log: &log}
	d := &entry{name: "d", due: t0.Add(2 * time.Second), log: &log}
	c.Fix(a)
	c.Fix(b)
	c.Fix(d)
	if next := c.Next(); !next.Equal(t0.Add(time.Second)) {
		t.Fatalf("Next %v, want b's due", next)
	}
	c.Fire(t0.Add(1500 * time.Millisecond))
	c.Fire(t0.Add(2 * time.Second))
	if !c.Next().IsZero() {
		t.Fatalf("Next %v after every entry fired, want none", c.Next())
	}

	now = t0.Add(3 * time.Second)
	f1 := c.Call(a, 0, "r1", election.Op{Kind: election.OpPut}, 0)
	f2 := c.Call(a, 0, "r2", election.Op{Kind: election.OpGet}, 0)
	f3 := c.Call(b, 0, "r3", election.Op{Kind: election.OpGet}, 0)
	f4 := c.Call(d, 0, "r4", election.Op{Kind: election.OpGet}, 0)
	c.Cancel(f3) // waiting: dropped
	c.Cancel(f2) // started: abandoned, still answered
	if !f1.Op().Record.WrittenAt.Equal(now) {
		t.Fatalf("written at %v, want the Core's time %v", f1.Op().Record.WrittenAt, now)
	}
	c.Answer(f1, election.Result{})
	c.Answer(f2, election.Result{})
	c.Answer(f4, election.Result{})
	want := []string{"b fired", "a fired", "d fired",
		"start r1", "start r2", "abandon r2", "start r4", "a answered r1", "a answered r2", "d answered r4"}
	if !slices.Equal(log, want) {
		t.Fatalf("log\n%q\nwant\n%q", log, want)
	}
}

// A call's timeout runs on the Core's clock from the call's start (a call
// waiting its turn has not started): Next names it, Fire abandons the call
// and answers it election.ErrTimeout, and the store's late answer is
// dropped.
func TestCoreTimesCallsOut(t *testing.T) {
	var log []string
	t0 := time.Unix(1000, 0)
	now := t0
	calls := &script{log: &log}
	c := NewCore(func() time.Time { return now }, calls, 1)
	a := &entry{name: "a", log: &log}
	f1 := c.Call(a, 0, "r1", election.Op{ID: 1, Kind: election.OpGet}, time.Second)
	now = t0.Add(500 * time.Millisecond)
	f2 := c.Call(a, 0, "r2", election.Op{ID: 2, Kind: election.OpGet}, time.Second) // waits for r1
	if next := c.Next(); !next.Equal(t0.Add(time.Second)) {
		t.Fatalf("Next %v, want r1's timeout", next)
	}
	c.Fire(t0.Add(999 * time.Millisecond))
	now = t0.Add(time.Second)
	c.Fire(now) // r1 times out; r2 starts now, its second from here
	if !f1.TimedOut() || f2.TimedOut() {
		t.Fatalf("timed out: r1 %t r2 %t, want r1 only", f1.TimedOut(), f2.TimedOut())
	}
	c.Answer(f1, election.Result{ID: 1}) // the store, late: dropped
	if next := c.Next(); !next.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("Next %v, want r2's timeout, a second after its start", next)
	}
	now = t0.Add(1200 * time.Millisecond)
	c.Answer(f2, election.Result{ID: 2})
	want := []string{"start r1", "abandon r1", "start r2", "a answered r1", "a answered r2"}
	if !slices.Equal(log, want) {
		t.Fatalf("log\n%q\nwant\n%q", log, want)
	}
	if !c.Next().IsZero() {
		t.Fatalf("Next %v once every call is answered, want none", c.Next())
	}
}

// A flight answered is the Core's again: the next call reuses it, whole
// and fresh; one the Core timed out is not reused, since its call's late
// answer may still come.
func TestCoreReusesAnsweredFlights(t *testing.T) {
	var log []string
	now := time.Unix(1000, 0)
	c := NewCore(func() time.Time { return now }, &script{log: &log}, 0)
	a := &entry{name: "a", log: &log}
	f1 := c.Call(a, 7, "r1", election.Op{Kind: election.OpPut}, 0)
	c.Answer(f1, election.Result{})
	f2 := c.Call(a, 0, "r2", election.Op{Kind: election.OpGet}, time.Second)
	if f2 != f1 || f2.Tag() != 0 || f2.Name() != "r2" || f2.TimedOut() || f2.Timeout() != time.Second {
		t.Fatalf("second call: %+v, want the first's flight, fresh", f2)
	}
	now = now.Add(time.Second)
	c.Fire(now) // f2 times out
	if f3 := c.Call(a, 0, "r3", election.Op{Kind: election.OpGet}, 0); f3 == f2 {
		t.Fatal("a flight the Core timed out was reused: its late answer would reach another call")
	}
	c.Answer(f2, election.Result{}) // the late answer: dropped
	if !f2.TimedOut() || len(a.res) != 2 {
		t.Fatalf("late answer: timed out %v, %d answers; want true, 2", f2.TimedOut(), len(a.res))
	}
}
