package tenure

import (
	"net/http"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/shell"
)

// candidateHealth is the JSON body of a Candidate's Handler.
type candidateHealth struct {
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

// Handler returns the candidate's probes, for Kubernetes and load
// balancers. Each answers 200 or 503 with the candidate's state as JSON
// (its fields: docs/cli.md, "Probes and metrics"):
//
//	/livez    the process and its loop are alive: Run runs, and its loop
//	          has stepped within its longest wait; a store outage is not a
//	          liveness failure (a liveness probe on the store would restart
//	          every replica in an outage)
//	/readyz   the store answered within the last LeaseDuration (with
//	          Standby: within a cold poll and an OpTimeout, if longer,
//	          since a cold follower reads that rarely)
//	/leader   this candidate leads: a readiness probe that routes a
//	          Service to the leader alone
//	/healthz  as /readyz, for probes set up before /readyz existed
//
// Other paths answer 404, other methods 405. Mount it at the root of its
// own listener, or under a prefix with http.StripPrefix. It reads Status
// only; it cannot change leadership, and it leaves the payload out
// (payloads often hold addresses). Serve it only where its readers may
// learn who leads.
func (c *Candidate) Handler() http.Handler {
	return shell.Probes(func(probe string) (bool, any) {
		st := c.Status()
		answered := st.LastAnswer
		now := c.cfg.Clock.Now()
		running, _ := c.sh.Running()
		h := candidateHealth{Lease: c.cfg.Lease, ID: c.cfg.ID, Running: running, Leading: st.Leading,
			Standby: st.Standby, Leader: st.Leader.Holder, LeaderToken: uint64(st.Leader.Token)}
		if st.Leading {
			h.Token = uint64(st.Token)
			d := st.Deadline.Round(0).UTC()
			h.Deadline = &d
		}
		if st.Err != nil {
			h.Error = st.Err.Error()
		}
		if !answered.IsZero() {
			s := now.Sub(answered).Seconds()
			h.LastAnswerSeconds = &s
		}
		switch probe {
		case "livez":
			h.Healthy, h.Reason = c.alive(now)
		case "leader":
			h.Healthy, h.Reason = h.Leading, "not leading"
			if h.Leading {
				h.Reason = ""
			}
		default:
			within := c.cfg.LeaseDuration
			if c.cfg.Standby {
				within = max(within, election.MaxPoll(c.cfg.ColdPollInterval)+c.cfg.OpTimeout)
			}
			h.Healthy, h.Reason = shell.Health(h.Running, answered, now, within)
		}
		return h.Healthy, h
	})
}

// alive reports whether Run runs and its loop stepped lately: it wakes at
// least once a poll (a cold one with Standby) and an OpTimeout, so a loop
// silent for twice that and a lease is stuck.
func (c *Candidate) alive(now time.Time) (bool, string) {
	running, at := c.sh.Running()
	if !running {
		return false, "not running"
	}
	poll := max(c.cfg.PollInterval, c.cfg.ColdPollInterval, c.cfg.RenewInterval)
	bound := 2*(election.MaxPoll(poll)+c.cfg.OpTimeout) + c.cfg.LeaseDuration
	if now.Sub(at) > bound {
		return false, "the loop has not stepped for " + now.Sub(at).Round(time.Millisecond).String()
	}
	return true, ""
}

// lockerHealth is the JSON body of a Locker's Handler.
type lockerHealth struct {
	Healthy           bool     `json:"healthy"`
	Reason            string   `json:"reason,omitempty"`
	ID                string   `json:"id"`
	Running           bool     `json:"running"`
	Held              int64    `json:"held"`
	LastAnswerSeconds *float64 `json:"last_answer_seconds,omitempty"`
}

// Handler returns the Locker's probes, as a Candidate's Handler: /livez
// (the Locker is open), /readyz and /healthz (if it has made store calls,
// the store answered within the last LeaseDuration), /leader (it holds at
// least one lock). Each answers 200 or 503 with its state as JSON (docs/cli.md); it
// names no lock. Other paths answer 404.
func (l *Locker) Handler() http.Handler {
	return shell.Probes(func(probe string) (bool, any) {
		now := l.cfg.Clock.Now()
		answered := l.LastAnswer()
		running := l.sh.Open()
		h := lockerHealth{ID: l.cfg.ID, Running: running, Held: l.sh.Held()}
		switch {
		case probe == "livez":
			h.Healthy = running
			if !running {
				h.Reason = "closed"
			}
		case probe == "leader":
			h.Healthy = running && h.Held > 0
			if !h.Healthy {
				h.Reason = "holds no lock"
			}
		case answered.IsZero() && running:
			h.Healthy = true // idle: nothing asked of the store yet
		default:
			h.Healthy, h.Reason = shell.Health(running, answered, now, l.cfg.LeaseDuration)
		}
		if !answered.IsZero() {
			s := now.Sub(answered).Seconds()
			h.LastAnswerSeconds = &s
		}
		return h.Healthy, h
	})
}

// groupHealth is the JSON body of a Group's Handler.
type groupHealth struct {
	Healthy           bool     `json:"healthy"`
	Reason            string   `json:"reason,omitempty"`
	ID                string   `json:"id"`
	Group             string   `json:"group"`
	Running           bool     `json:"running"`
	Held              int64    `json:"held"`
	LastAnswerSeconds *float64 `json:"last_answer_seconds,omitempty"`
}

// Handler returns the member's probes, as a Locker's Handler: /livez (Run
// runs), /readyz and /healthz (the store answered within the last
// LeaseDuration), /leader (it holds at least one shard). Each answers 200
// or 503 with its state as JSON (docs/cli.md). Other paths answer 404.
func (g *Group) Handler() http.Handler {
	return shell.Probes(func(probe string) (bool, any) {
		now := g.cfg.Clock.Now()
		answered := g.LastAnswer()
		running := g.sh.Running()
		h := groupHealth{ID: g.cfg.ID, Group: g.cfg.Name, Running: running, Held: g.sh.Held()}
		switch probe {
		case "livez":
			h.Healthy = running
			if !running {
				h.Reason = "not running"
			}
		case "leader":
			h.Healthy = running && h.Held > 0
			if !h.Healthy {
				h.Reason = "holds no shard"
			}
		default:
			h.Healthy, h.Reason = shell.Health(running, answered, now, g.cfg.LeaseDuration)
		}
		if !answered.IsZero() {
			s := now.Sub(answered).Seconds()
			h.LastAnswerSeconds = &s
		}
		return h.Healthy, h
	})
}
