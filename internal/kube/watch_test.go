package kube

import (
	"net/http"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tenure-go/tenure/lease"
)

// A watch the API server ends with an error (410 Gone above all: the
// version it would resume from is compacted away, or gone from the watch
// cache) starts over from a fresh list; asking for that version again
// would fail for ever. One that merely ends resumes from its last event.
// (watch.FakeWatcher stands in for the stream: what it carries is what
// the API server sends, an ERROR event with the 410 Status.)
func TestFollowStartsOverOnGone(t *testing.T) {
	lease1 := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "job", ResourceVersion: "42"}}
	gone := &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired,
		Message: "too old resource version: 40 (41)"}
	for _, c := range []struct {
		name  string
		end   func(w *watch.FakeWatcher)
		want  string
		count int // events told
	}{
		{"ended", func(w *watch.FakeWatcher) { w.Stop() }, "42", 1},
		{"gone", func(w *watch.FakeWatcher) { w.Error(gone) }, "", 1},
		{"bookmark, then gone", func(w *watch.FakeWatcher) {
			w.Action(watch.Bookmark, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "50"}})
			w.Error(gone)
		}, "", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := watch.NewFakeWithChanSize(4, false)
			w.Modify(lease1)
			c.end(w)
			var told []lease.Event
			s := &Store{seen: map[string]*coordinationv1.Lease{}}
			if got := s.follow("job", w, func(ev lease.Event) { told = append(told, ev) }, "7"); got != c.want {
				t.Errorf("resume from %q, want %q", got, c.want)
			}
			if len(told) != c.count || told[0].Version != "42" {
				t.Errorf("told %+v, want the write of version 42", told)
			}
		})
	}
}

// An event carries the record the Lease holds, for a follower to time a
// renewal by; a Lease of something else carries none. The Lease told is
// remembered for a takeover from it, unless a newer one is.
func TestFollowTellsTheRecord(t *testing.T) {
	s := &Store{ns: "ns", seen: map[string]*coordinationv1.Lease{}}
	rec := lease.Record{Holder: "a", Token: 7, Duration: 10 * time.Second, Nonce: "n", WrittenAt: time.Unix(1, 0)}
	renewal := s.encode("job", rec, nil)
	renewal.ResourceVersion = "42"
	older := renewal.DeepCopy()
	older.ResourceVersion = "41"
	foreign := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "job", ResourceVersion: "43"}}
	w := watch.NewFakeWithChanSize(4, false)
	w.Modify(renewal)
	w.Modify(older) // late: not remembered over 42
	w.Modify(foreign)
	w.Stop()
	var told []lease.Event
	s.follow("job", w, func(ev lease.Event) { told = append(told, ev) }, "7")
	if len(told) != 3 || told[0].Record == nil || told[0].Record.Holder != "a" || told[0].Record.Token != 7 ||
		told[0].Record.Duration != 10*time.Second || told[2].Record != nil {
		t.Fatalf("told %+v: want a's record at 42, none for the foreign Lease", told)
	}
	if got := s.recall("job", "42"); got == nil {
		t.Error("the Lease at 42 is not remembered for a takeover from it")
	}
}
