package engine

import (
	"testing"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fencing"
)

func TestDispatchOneAtATimeInOrder(t *testing.T) {
	var d Dispatch
	now := time.Unix(100, 0)
	d.Push(Job{Kind: JobElected, Term: election.Term{Token: 1}})
	d.Push(Job{Kind: JobDemoted, Term: election.Term{Token: 1}})
	j, ok := d.Next(now)
	if !ok || j.Kind != JobElected {
		t.Fatalf("first job %v %v, want OnElected", j.Name(), ok)
	}
	if name, since := d.Busy(); name != "OnElected" || !since.Equal(now) {
		t.Fatalf("busy %q since %v", name, since)
	}
	if _, ok := d.Next(now); ok {
		t.Fatal("a second job handed out while OnElected runs")
	}
	d.Done(false)
	if j, ok := d.Next(now); !ok || j.Kind != JobDemoted {
		t.Fatalf("second job %v %v, want OnDemoted", j.Name(), ok)
	}
	d.Close()
	if d.Finished() {
		t.Fatal("finished while OnDemoted runs")
	}
	d.Done(false)
	if !d.Finished() {
		t.Fatal("not finished: closed, empty and idle")
	}
}

// After a callback panicked, the callbacks queued are dropped but the
// barriers still pass: the loop waits on them to release the lease.
func TestDispatchAfterPanicOnlyBarriers(t *testing.T) {
	var d Dispatch
	now := time.Unix(100, 0)
	d.Push(Job{Kind: JobElected})
	d.Next(now)
	d.Push(Job{Kind: JobDemoted})
	d.Push(Job{Kind: JobBarrier})
	d.Push(Job{Kind: JobElected})
	d.Done(true)
	j, ok := d.Next(now)
	if !ok || j.Kind != JobBarrier {
		t.Fatalf("after a panic got %v %v, want the barrier", j.Kind, ok)
	}
	if name, _ := d.Busy(); name != "" {
		t.Fatalf("a barrier shows as %q running", name)
	}
	d.Done(false)
	if j, ok := d.Next(now); ok {
		t.Fatalf("a callback handed out after a panic: %v", j.Name())
	}
}

// Leaders that change while OnLeaderChange runs coalesce into one call
// with the latest.
func TestNotifyCoalesces(t *testing.T) {
	var n Notify
	n.Push(election.Leader{Holder: "a", Token: 1})
	l, ok := n.Next()
	if !ok || l.Holder != "a" {
		t.Fatalf("first %v %v", l, ok)
	}
	n.Push(election.Leader{Holder: "b", Token: 2})
	n.Push(election.Leader{Holder: "c", Token: fencing.Token(3)})
	if _, ok := n.Next(); ok {
		t.Fatal("a second call while one runs")
	}
	n.Close()
	if n.Finished() {
		t.Fatal("finished with a leader waiting")
	}
	n.Done(false)
	if l, ok := n.Next(); !ok || l.Holder != "c" {
		t.Fatalf("after the call got %v %v, want the latest, c", l, ok)
	}
	n.Done(false)
	if _, ok := n.Next(); ok || !n.Finished() {
		t.Fatal("want nothing more, and finished")
	}
}

func TestNotifyStopsAfterPanic(t *testing.T) {
	var n Notify
	n.Push(election.Leader{Holder: "a"})
	n.Next()
	n.Push(election.Leader{Holder: "b"})
	n.Done(true)
	if l, ok := n.Next(); ok {
		t.Fatalf("called again after a panic, with %v", l)
	}
	n.Close()
	if !n.Finished() {
		t.Fatal("a broken queue with a leader waiting must still finish")
	}
}
