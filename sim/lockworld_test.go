package sim

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/election"
)

// TestLockCheckerCatches shows the lock checker flags what it claims to:
// two believers (I1), a token that does not rise (I2), a late answer (I5)
// and a grant past an older live fair waiter (I7).
func TestLockCheckerCatches(t *testing.T) {
	sc := Lookup("lock-fair")
	w := &lockWorld{sc: sc, plan: sc.plan(1), holders: map[string][]*lproc{}, maxTok: map[string]uint64{}}
	w.lp = w.plan.Locks
	n := &lnode{w: w, timing: election.Timing{}.WithDefaults(), rng: rand.New(rand.NewPCG(1, 1))}
	proc := func(id string, ticket uint64) *lproc {
		p := &lproc{n: n, id: id, name: "lock/0", fair: true, ticket: ticket, bound: n.local().Add(time.Minute)}
		w.waiting = append(w.waiting, p)
		return p
	}
	older, younger := proc("older", 3), proc("younger", 5)
	younger.Granted(election.Term{Token: 10, Deadline: n.local().Add(10 * time.Second)})
	if w.counts[FairOrder] != 1 {
		t.Errorf("a grant past an older live waiter: I7 counted %d times, want 1", w.counts[FairOrder])
	}
	older.bound = n.local().Add(-time.Second)
	older.Granted(election.Term{Token: 9, Deadline: n.local().Add(10 * time.Second)})
	for inv, what := range map[Invariant]string{OneLeader: "two believers", Tokens: "a token below an earlier grant's", Liveness: "an answer past the deadline"} {
		if w.counts[inv] != 1 {
			t.Errorf("%s: %v counted %d times, want 1", what, inv, w.counts[inv])
		}
	}
	var msgs []string
	for _, v := range w.viol {
		msgs = append(msgs, v.String())
	}
	if got := strings.Join(msgs, "\n"); !strings.Contains(got, "younger is granted lock/0 with ticket 5 while older waits, live, with ticket 3") {
		t.Errorf("violations:\n%s", got)
	}
}
