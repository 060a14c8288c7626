package tenure

import (
	"encoding/json"
	"errors"
	"github.com/tenure-go/tenure/election"
	"net/http"
	"sync"
	"time"

	"github.com/tenure-go/tenure/lease"
)

// lastAnswer is when the store last answered a call: with a record, a
// conflict or no record, not with an error.
type lastAnswer struct {
	mu sync.Mutex
	at time.Time // local time
}

func (a *lastAnswer) note(clk Clock, err error) {
	if err == nil || errors.Is(err, lease.ErrConflict) || errors.Is(err, lease.ErrNotFound) {
		now := clk.Now()
		a.mu.Lock()
		a.at = now
		a.mu.Unlock()
	}
}

func (a *lastAnswer) get() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.at
}

// CandidateHealth is the JSON body of a Candidate's Handler.
type CandidateHealth struct {
	Healthy bool   `json:"healthy"`
	Reason  string `json:"reason,omitempty"` // why not
	Lease   string `json:"lease"`
	ID      string `json:"id"`
	Running bool   `json:"running"`
	Leading bool   `json:"leading"`
	Standby bool   `json:"standby,omitempty"` // the follower that polls closely (Config.Standby)
	Token   uint64 `json:"token,omitempty"`
	// Deadline is the local end of the term unless renewed, while leading.
	Deadline *time.Time `json:"deadline,omitempty"`
	// Leader is the holder last seen in the store, and its token.
	Leader      string `json:"leader,omitempty"`
	LeaderToken uint64 `json:"leader_token,omitempty"`
	// LastAnswer is how long ago the store last answered, by this host's
	// clock; absent before the first answer.
	LastAnswerSeconds *float64 `json:"last_answer_seconds,omitempty"`
	Error             string   `json:"error,omitempty"`
}

// Handler returns an http.Handler that reports the candidate's health, for
// a liveness or readiness probe: 200 while Run runs and the store answered
// within the last LeaseDuration (with Standby: within a cold poll and an
// OpTimeout, if longer, since a cold follower reads that rarely), else
// 503, with a CandidateHealth as JSON
// either way. It reads Status only; it cannot change leadership, and it
// leaves the payload out (payloads often hold addresses). Serve it only
// where its readers may learn who leads.
func (c *Candidate) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		st := c.Status()
		answered := st.LastAnswer
		now := c.cfg.Clock.Now()
		h := CandidateHealth{Lease: c.cfg.Lease, ID: c.cfg.ID, Running: c.running.Load(), Leading: st.Leading,
			Standby: st.Standby, Leader: st.Leader.Holder, LeaderToken: uint64(st.Leader.Token)}
		if st.Leading {
			h.Token = uint64(st.Token)
			d := st.Deadline.Round(0).UTC()
			h.Deadline = &d
		}
		if st.Err != nil {
			h.Error = st.Err.Error()
		}
		within := c.cfg.LeaseDuration
		if c.cfg.Standby {
			within = max(within, election.MaxPoll(c.cfg.ColdPollInterval)+c.cfg.OpTimeout)
		}
		h.Healthy, h.Reason = health(h.Running, answered, now, within)
		if !answered.IsZero() {
			s := now.Sub(answered).Seconds()
			h.LastAnswerSeconds = &s
		}
		writeHealth(w, h.Healthy, h)
	})
}

// health decides a probe's answer.
func health(running bool, answered, now time.Time, within time.Duration) (bool, string) {
	switch {
	case !running:
		return false, "not running"
	case answered.IsZero():
		return false, "no answer from the store yet"
	case now.Sub(answered) > within:
		return false, "no answer from the store for " + now.Sub(answered).Round(time.Millisecond).String()
	}
	return true, ""
}

func writeHealth(w http.ResponseWriter, ok bool, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}

// LockerHealth is the JSON body of a Locker's Handler.
type LockerHealth struct {
	Healthy           bool     `json:"healthy"`
	Reason            string   `json:"reason,omitempty"`
	ID                string   `json:"id"`
	Running           bool     `json:"running"`
	Held              int64    `json:"held"`
	LastAnswerSeconds *float64 `json:"last_answer_seconds,omitempty"`
}

// Handler returns an http.Handler that reports the Locker's health: 200
// while it is open and, if it has made store calls, the store answered
// within the last LeaseDuration; else 503. The body is a LockerHealth as
// JSON. It names no lock.
func (l *Locker) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		now := l.cfg.Clock.Now()
		answered := l.LastAnswer()
		running := true
		select {
		case <-l.quit:
			running = false
		default:
		}
		h := LockerHealth{ID: l.cfg.ID, Running: running, Held: l.held.Load()}
		switch {
		case answered.IsZero() && running:
			h.Healthy = true // idle: nothing asked of the store yet
		default:
			h.Healthy, h.Reason = health(running, answered, now, l.cfg.LeaseDuration)
		}
		if !answered.IsZero() {
			s := now.Sub(answered).Seconds()
			h.LastAnswerSeconds = &s
		}
		writeHealth(w, h.Healthy, h)
	})
}
