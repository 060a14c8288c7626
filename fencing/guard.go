package fencing

import (
	"errors"
	"fmt"
	"sync"
)

// ErrStaleToken is matched (errors.Is) by every *StaleTokenError.
var ErrStaleToken = errors.New("fencing: stale token")

// StaleTokenError reports a token lower than one the resource already accepted.
type StaleTokenError struct {
	Lease     string
	Presented Token // the token the writer sent
	Current   Token // the highest token accepted so far
}

func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("fencing: lease %q: token %d is stale, token %d was already accepted", e.Lease, e.Presented, e.Current)
}

// Is makes errors.Is(err, ErrStaleToken) true.
func (e *StaleTokenError) Is(target error) bool { return target == ErrStaleToken }

// Guard protects a resource inside one process: it remembers, per lease, the
// highest token it has accepted and runs an action only for a token that is
// not lower. The check, the action and the advance happen under one lock, so a
// stale writer can never slip in between (no check-then-act). The zero value is
// ready to use; a Guard must not be copied after first use.
type Guard struct {
	mu      sync.Mutex       // guards highest and serializes actions
	highest map[string]Token // by lease name
}

// Do runs action if token is not lower than the highest token accepted for
// leaseName, and records token as accepted before running it: a resource that
// has seen token t must refuse every lower token from then on, whatever the
// action returns. A stale token gets a *StaleTokenError and action does not run.
// Actions run one at a time; they must not call Do on the same Guard.
func (g *Guard) Do(leaseName string, token Token, action func() error) error {
	if token == 0 {
		return fmt.Errorf("fencing: lease %q: zero token (tokens start at 1)", leaseName)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if cur := g.highest[leaseName]; token < cur {
		return &StaleTokenError{Lease: leaseName, Presented: token, Current: cur}
	}
	if g.highest == nil {
		g.highest = make(map[string]Token)
	}
	g.highest[leaseName] = token
	return action()
}

// Highest returns the highest token accepted for leaseName, or 0.
func (g *Guard) Highest(leaseName string) Token {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.highest[leaseName]
}
