package fencing

import (
	"context"
	"fmt"
	"sync"
)

// Guard protects a resource inside one process: it remembers, per lease, the
// highest token it has accepted and runs an action only for a token that is
// not lower. The check, the advance and the action happen while the Guard is
// held, so a stale writer can never slip in between (no check-then-act).
//
// Do runs actions one at a time, whatever their lease: the safe choice for a
// resource that is not itself safe for concurrent use. DoShared lets the
// actions of the current term run together and still keeps every older term
// out. Highest may be called at any time, from actions too.
//
// A goroutine waiting for the Guard waits on a channel, never on a mutex held
// across an action, so under testing/synctest it counts as durably blocked
// and fake time can move on while an action sleeps.
//
// A Guard remembers tokens only as long as it lives; a resource that outlives
// the process must store its fence with its data (see the subpackages). The
// zero value is ready to use; a Guard must not be copied after first use.
type Guard struct {
	mu      sync.Mutex       // guards the fields below; never held while an action runs
	highest map[string]Token // by lease name; changes only while no action runs
	writing bool             // an exclusive action runs (or a token advances)
	readers int              // shared actions running
	waiting int              // exclusive callers waiting; shared ones queue behind them
	changed chan struct{}    // closed when writing, readers or waiting change; nil until someone waits
}

// Do runs action if token is not lower than the highest token accepted for
// leaseName, and records token as accepted before running it: a resource that
// has seen token t must refuse every lower token from then on, whatever the
// action returns. A stale token gets a *StaleTokenError and action does not
// run; so does the zero token, with an error of its own.
//
// Actions run one at a time, and not concurrently with DoShared's. An action
// must not call Do, DoShared or DoContext on the same Guard (it would wait for
// itself); a panic in action leaves the Guard usable and reaches the caller.
func (g *Guard) Do(leaseName string, token Token, action func() error) error {
	if token == 0 {
		return zeroToken(leaseName)
	}
	return g.exclusive(leaseName, token, nil, action)
}

// DoShared is Do for actions that may run concurrently with each other, such
// as the handlers of an HTTP server. An action whose token equals the highest
// accepted for its lease runs alongside other DoShared actions, as soon as no
// exclusive action (Do's, or a new term's first) runs or waits. The first
// action of a higher token waits until every running action has returned,
// advances the lease and runs alone, so that no action of an older term runs
// at the same time as, or after, one of a newer term. Stale tokens are
// refused as by Do. Shared actions that arrive while a higher token waits
// queue behind it, so a busy old term cannot hold off a new leader.
func (g *Guard) DoShared(leaseName string, token Token, action func() error) error {
	if token == 0 {
		return zeroToken(leaseName)
	}
	g.mu.Lock()
	for {
		cur := g.highest[leaseName]
		if token < cur {
			g.mu.Unlock()
			return &StaleTokenError{Lease: leaseName, Presented: token, Current: cur}
		}
		if token > cur {
			// A newer term queues as exclusive at once, so that shared
			// callers of the older term arriving later wait behind it.
			g.mu.Unlock()
			return g.exclusive(leaseName, token, nil, action)
		}
		if !g.writing && g.waiting == 0 {
			break
		}
		g.wait() // the highest token may have moved meanwhile: check again
	}
	g.readers++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		if g.readers--; g.readers == 0 {
			g.broadcast()
		}
		g.mu.Unlock()
	}()
	return action()
}

// DoContext is Do for the Fence that ctx carries (FromContext), for code
// running under OnElected's context. It returns ErrNoFence if ctx carries
// none, and, once it holds the Guard, refuses to act if ctx is done (the term
// ended while the caller waited), without recording the token.
//
// Use it where the resource lives in the leader's own process. A resource
// elsewhere cannot see the writer's context: it must check the token alone,
// with Do and the Fence the request presented.
func (g *Guard) DoContext(ctx context.Context, action func() error) error {
	f, ok := FromContext(ctx)
	if !ok {
		return ErrNoFence
	}
	if f.Token == 0 {
		return zeroToken(f.Lease)
	}
	return g.exclusive(f.Lease, f.Token, ctx, action)
}

// exclusive waits until no action runs, then, unless ctx (if not nil) is done
// or token is stale, records token and runs action alone.
func (g *Guard) exclusive(leaseName string, token Token, ctx context.Context, action func() error) error {
	g.mu.Lock()
	g.waiting++
	for g.writing || g.readers > 0 {
		g.wait()
	}
	g.waiting--
	err := g.advance(leaseName, token, ctx)
	if err != nil {
		g.broadcast() // waiting went down: shared callers may go on
		g.mu.Unlock()
		return err
	}
	g.writing = true
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.writing = false
		g.broadcast()
		g.mu.Unlock()
	}()
	return action()
}

// advance records token for leaseName, or reports why it may not. The caller
// holds mu and no action runs.
func (g *Guard) advance(leaseName string, token Token, ctx context.Context) error {
	if ctx != nil {
		if err := Err(ctx); err != nil {
			return fmt.Errorf("fencing: %v: not run: %w", Fence{leaseName, token}, err)
		}
	}
	cur := g.highest[leaseName]
	if token < cur {
		return &StaleTokenError{Lease: leaseName, Presented: token, Current: cur}
	}
	if token > cur {
		if g.highest == nil {
			g.highest = make(map[string]Token)
		}
		g.highest[leaseName] = token
	}
	return nil
}

// wait releases mu until the Guard's state changes, then takes it again.
func (g *Guard) wait() {
	if g.changed == nil {
		g.changed = make(chan struct{})
	}
	ch := g.changed
	g.mu.Unlock()
	<-ch
	g.mu.Lock()
}

// broadcast wakes every waiter. The caller holds mu.
func (g *Guard) broadcast() {
	if g.changed != nil {
		close(g.changed)
		g.changed = nil
	}
}

// Highest returns the highest token accepted for leaseName, or 0.
func (g *Guard) Highest(leaseName string) Token {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.highest[leaseName]
}

func zeroToken(leaseName string) error {
	return fmt.Errorf("fencing: lease %q: zero token (tokens start at 1)", leaseName)
}
