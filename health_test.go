package tenure_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/lease/memlease"
)

// The probes' JSON bodies, as docs/cli.md lists their fields.
type candidateBody struct {
	Healthy           bool       `json:"healthy"`
	Reason            string     `json:"reason"`
	Lease             string     `json:"lease"`
	ID                string     `json:"id"`
	Running           bool       `json:"running"`
	Leading           bool       `json:"leading"`
	Standby           bool       `json:"standby"`
	Token             uint64     `json:"token"`
	Deadline          *time.Time `json:"deadline"`
	Leader            string     `json:"leader"`
	LeaderToken       uint64     `json:"leader_token"`
	LastAnswerSeconds *float64   `json:"last_answer_seconds"`
	Error             string     `json:"error"`
}

type lockerBody struct {
	Healthy           bool     `json:"healthy"`
	Reason            string   `json:"reason"`
	ID                string   `json:"id"`
	Running           bool     `json:"running"`
	Held              int64    `json:"held"`
	LastAnswerSeconds *float64 `json:"last_answer_seconds"`
}

func probe(t *testing.T, h http.Handler, body any) int {
	t.Helper()
	return probePath(t, h, "/healthz", body)
}

func probePath(t *testing.T, h http.Handler, path string, body any) int {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	if rec.Code == 404 {
		return 404
	}
	if err := json.Unmarshal(rec.Body.Bytes(), body); err != nil {
		t.Fatalf("body %q: %v", rec.Body.String(), err)
	}
	return rec.Code
}

// TestCandidateHandler: 503 before Run, 200 while it runs and the store
// answers, 503 once the store has not answered for a lease, 200 again when
// it does.
func TestCandidateHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		var h candidateBody
		a := w.start("a", nil)
		synctest.Wait()
		if code := probe(t, a.c.Handler(), &h); code != 200 || !h.Healthy || !h.Leading || h.Token == 0 || h.LastAnswerSeconds == nil {
			t.Fatalf("leading: %d %+v", code, h)
		}
		a.faults.FailAll()
		wait(5 * time.Second)
		if code := probe(t, a.c.Handler(), &h); code != 200 {
			t.Fatalf("store failing for 5s of a 10s lease: %d %+v", code, h)
		}
		wait(6 * time.Second)
		if code := probe(t, a.c.Handler(), &h); code != 503 || h.Healthy || h.Reason == "" || !h.Running {
			t.Fatalf("store failing for 11s: %d %+v", code, h)
		}
		a.faults.Heal()
		wait(3 * time.Second)
		if code := probe(t, a.c.Handler(), &h); code != 200 || !h.Healthy {
			t.Fatalf("store back: %d %+v", code, h)
		}
		if err := a.stop(); err != nil {
			t.Fatal(err)
		}
		if code := probe(t, a.c.Handler(), &h); code != 503 || h.Running || h.Reason != "not running" {
			t.Fatalf("after Run: %d %+v", code, h)
		}
	})
}

func TestCandidateHandlerBeforeRun(t *testing.T) {
	c, err := tenure.New(tenure.Config{Lease: "a", Store: memlease.New(), Runtime: tenure.Runtime{ID: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	var h candidateBody
	if code := probe(t, c.Handler(), &h); code != 503 || h.Reason != "not running" || h.Lease != "a" {
		t.Fatalf("%d %+v", code, h)
	}
}

func TestLockerHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLocker(t, memlease.New(), "l")
		var h lockerBody
		if code := probe(t, l.Handler(), &h); code != 200 || !h.Healthy || h.Held != 0 {
			t.Fatalf("idle: %d %+v", code, h)
		}
		lk, err := l.TryLock(context.Background(), "job")
		if err != nil {
			t.Fatal(err)
		}
		if code := probe(t, l.Handler(), &h); code != 200 || h.Held != 1 || h.LastAnswerSeconds == nil {
			t.Fatalf("holding: %d %+v", code, h)
		}
		if err := lk.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
		if code := probe(t, l.Handler(), &h); code != 200 || h.Held != 0 {
			t.Fatalf("after Unlock: %d %+v", code, h)
		}
		l.Close()
		if code := probe(t, l.Handler(), &h); code != 503 || h.Running {
			t.Fatalf("closed: %d %+v", code, h)
		}
	})
}

// TestCandidateHandlerColdFollower: a cold follower reads every 20s, more
// than a lease (10s): it stays healthy between its reads, and reports
// whether it is the standby.
func TestCandidateHandlerColdFollower(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		w.start("a", nil, standbyOn)
		synctest.Wait()
		b, c := w.start("b", nil, standbyOn), w.start("c", nil, standbyOn)
		wait(time.Minute)
		cold := b
		if b.c.Status().Standby {
			cold = c
		}
		var h candidateBody
		for range 60 { // every second for a minute: three cold polls
			if code := probe(t, cold.c.Handler(), &h); code != 200 || h.Standby {
				t.Fatalf("cold follower: %d %+v", code, h)
			}
			wait(time.Second)
		}
		other := b
		if cold == b {
			other = c
		}
		if code := probe(t, other.c.Handler(), &h); code != 200 || !h.Standby {
			t.Fatalf("standby: %d %+v", code, h)
		}
	})
}

// TestCandidateProbes: in a store outage /readyz fails on every replica
// but /livez holds (a liveness probe must not restart them all); /leader
// answers 200 on the leader alone; other paths are 404.
func TestCandidateProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		a := w.start("a", nil)
		synctest.Wait()
		b := w.start("b", nil)
		wait(3 * time.Second)
		var h candidateBody
		for _, c := range []struct {
			who  *node
			path string
			want int
		}{{a, "/livez", 200}, {a, "/readyz", 200}, {a, "/leader", 200}, {b, "/livez", 200}, {b, "/readyz", 200}, {b, "/leader", 503}} {
			if code := probePath(t, c.who.c.Handler(), c.path, &h); code != c.want {
				t.Errorf("%s %s: %d, want %d: %+v", c.who.c.ID(), c.path, code, c.want, h)
			}
		}
		a.faults.FailAll()
		b.faults.FailAll()
		wait(15 * time.Second)
		for _, n := range []*node{a, b} {
			if code := probePath(t, n.c.Handler(), "/livez", &h); code != 200 {
				t.Errorf("%s /livez in a store outage: %d %+v", n.c.ID(), code, h)
			}
			if code := probePath(t, n.c.Handler(), "/readyz", &h); code != 503 {
				t.Errorf("%s /readyz in a store outage: %d %+v", n.c.ID(), code, h)
			}
		}
		for _, p := range []string{"/", "/metrics", "/livez/x"} {
			if code := probePath(t, a.c.Handler(), p, &h); code != 404 {
				t.Errorf("%s: %d, want 404", p, code)
			}
		}
		a.faults.Heal()
		b.faults.Heal()
	})
}
