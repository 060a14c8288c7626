package tenure

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/groupcore"
	"github.com/tenure-go/tenure/internal/shell"
	"github.com/tenure-go/tenure/lease"
)

// GroupConfig configures a Group. Store, Name, Shards and OnAssigned are
// required; every other field has a default, which NewGroup fills in on
// its own copy.
type GroupConfig struct {
	// Store keeps the shards' leases and the membership record.
	Store lease.Store
	// Name names the group: its shards are the leases Name/0 …
	// Name/Shards-1, its membership record Name::members.
	Name string
	// Shards is the number of shards, 1 to 4096. Every member of a group
	// must give the same number.
	Shards int
	// OnAssigned starts the work of a shard this member now holds. Its
	// context ends at the shard's local deadline (unless renewed), when
	// the shard moves to another member, and when Run returns; it carries
	// the shard's fence (fencing.FromContext). It may block, running the
	// shard's work until ctx ends, or return at once. Shards' callbacks
	// run concurrently, each shard's in order.
	OnAssigned func(ctx context.Context, s Shard)
	// OnRevoked is called once for every OnAssigned, after its context
	// ended and it returned; the shard is released only afterwards, so
	// that its next owner starts once this one stopped. Optional.
	OnRevoked func(s Shard, reason DemotionReason)
	// Weight is this member's capacity relative to the others': it holds
	// about Shards·Weight/(sum of the weights) shards. 0 means 1; at most
	// 9999.
	Weight int
	// Timing is every shard's lease's and the membership heartbeat's, as
	// a Candidate's; PollInterval is how often a member waiting for a
	// shard reads it. ColdPollInterval must be zero.
	Timing
	// Runtime is the process's: ID (it must differ between members),
	// Clock, Logger, wake-ups (by default on: see Runtime.WakeAddr), ...
	// The metrics are the store calls, terms and demotions under
	// group=Name, and tenure.group.shards.held.
	Runtime
	// StrongPolls makes a waiting member poll a shard with strongly
	// consistent reads where the store offers cheaper ones.
	StrongPolls bool
	// Watch makes each member also wait on the shards that would fall to it
	// were their owner to die, polling them as a lock's waiter does: a
	// crashed member's shards are then taken within the lock's failover
	// bound, instead of after the others suspect it (three beats more).
	// It costs a read per shard per PollInterval for the whole group
	// (tenure plan --shards K --members N --watch).
	Watch bool
}

// Shard is a shard of a group held by this member, for one term.
type Shard struct {
	Group string // the group's name
	ID    int    // 0 to Shards-1
	// Term is this member's term on the shard's lease (Lease is
	// Group/ID): its token is above every earlier holder's of this shard,
	// and its Fence is what the shard's writes present to a fenced
	// resource. Renewals move the deadline (the context's Deadline has the
	// current one).
	Term
}

// GroupStatus is a snapshot of what a member knows.
type GroupStatus struct {
	Group  string
	ID     string // this member's
	Key    string // its key in the membership record
	Shards int
	// Members are the live members as this one sees them: ID (where
	// known), key and weight.
	Members []GroupMember
	// Held lists the shards this member holds; Share is how many it
	// should hold as it last computed (⌊K/N⌋ or ⌈K/N⌉ of equal weights).
	Held  []int
	Share int
	// Balanced: it holds exactly the shards it should.
	Balanced bool
	// Err is the last store error, if any.
	Err error
}

// GroupMember is a member of a group as the membership record shows it.
type GroupMember struct {
	// ID is the member's ID, once this member has seen it hold a shard
	// (the membership record keeps keys only); "" until then.
	ID     string
	Key    string
	Weight int
}

// Group is one member of a group of processes that share Shards shards of
// work: each shard is a lease held by at most one member at a time, with
// its own fencing tokens; the members spread the shards evenly between
// them, hand them over when one joins or leaves, and take over those of
// a member that died. See docs/groups.md for what it guarantees.
type Group struct {
	cfg     GroupConfig
	sh      *shell.Group
	started atomic.Bool
}

// Validate checks every field, with the defaults filled in where a field
// is zero, as NewGroup does, and changes nothing.
func (c GroupConfig) Validate() error {
	_, err := c.resolved()
	return err
}

// resolved returns c with its defaults filled in, checked.
func (c GroupConfig) resolved() (GroupConfig, error) {
	bad := func(field, reason string) error {
		return fieldError(&election.FieldError{Field: field, Reason: reason})
	}
	switch {
	case c.Store == nil:
		return c, bad("Store", "is nil")
	case c.OnAssigned == nil:
		return c, bad("OnAssigned", "is nil")
	case c.Shards < 1 || c.Shards > groupcore.MaxShards:
		return c, bad("Shards", fmt.Sprintf("is %d: a group has 1 to %d", c.Shards, groupcore.MaxShards))
	case c.Weight < 0 || c.Weight > groupcore.MaxWeight:
		return c, bad("Weight", fmt.Sprintf("is %d: 0 (1) to %d", c.Weight, groupcore.MaxWeight))
	}
	if err := ValidateName(c.Name); err != nil {
		return c, fieldError(&election.FieldError{Field: "Name", Err: err})
	}
	for _, n := range []string{groupcore.ShardName(c.Name, c.Shards-1), c.Name + groupcore.MembersSuffix} {
		if err := lease.ValidateName(n); err != nil {
			return c, fieldError(&election.FieldError{Field: "Name", Reason: fmt.Sprintf("too long for the group's records (%q)", n), Err: err})
		}
	}
	if err := shell.CheckWake(c.WakeAddr, c.WakeAdvertise, "WakeAddr", "WakeAdvertise"); err != nil {
		return c, fieldError(err)
	}
	if err := noColdPolls(c.Timing, "a group"); err != nil {
		return c, err
	}
	c.Timing = c.Timing.WithDefaults()
	c.Runtime = c.Runtime.withDefaults()
	lc := c.machine(c.Timing, nil, c.Store, c.StrongPolls)
	if err := lc.Validate(); err != nil {
		return c, fieldError(err)
	}
	return c, nil
}

// NewGroup returns a member of the group cfg names; Run runs it.
func NewGroup(cfg GroupConfig) (*Group, error) {
	cfg, err := cfg.resolved()
	if err != nil {
		return nil, err
	}
	lc := cfg.machine(cfg.Timing, nil, cfg.Store, cfg.StrongPolls)
	ms, meter, err := shell.NewMetrics(cfg.MeterProvider, attribute.String("group", cfg.Name))
	if err != nil {
		return nil, fmt.Errorf("tenure: metrics: %w", err)
	}
	g := &Group{cfg: cfg}
	shard := func(i int, t election.Term) Shard { return Shard{Group: cfg.Name, ID: i, Term: t} }
	var onRevoked func(int, election.Term, election.Reason)
	if f := cfg.OnRevoked; f != nil {
		onRevoked = func(i int, t election.Term, r election.Reason) { f(shard(i, t), r) }
	}
	g.sh, err = shell.NewGroup(shell.GroupConfig{
		Campaign: groupcore.CampaignConfig{Name: cfg.Name, Shards: cfg.Shards, ID: cfg.ID, Weight: cfg.Weight, Lock: &lc, Watch: cfg.Watch},
		Store:    cfg.Store, Clock: cfg.Clock, Logger: cfg.Logger, WakeAddr: cfg.WakeAddr, WakeAdvertise: cfg.WakeAdvertise,
		Metrics: ms, Meter: meter,
		OnAssigned: func(ctx context.Context, i int, t election.Term) { cfg.OnAssigned(ctx, shard(i, t)) },
		OnRevoked:  onRevoked,
		Panicked: func(callback string, value any, stack []byte) any {
			return &CallbackPanic{Callback: callback, Value: value, Stack: stack}
		},
		Ended: func(lease string, token fencing.Token, reason election.Reason) error {
			return &TermEndedError{Lease: lease, Token: token, Reason: reason}
		},
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

// ID returns the identity this member writes into the records.
func (g *Group) ID() string { return g.cfg.ID }

// WakeAddr returns the address this member publishes for wake-ups while
// Run runs, or "" without one.
func (g *Group) WakeAddr() string { return g.sh.WakeAddr() }

// Run runs the member until ctx is done: it joins the group, holds and
// renews the shards that fall to it, and hands them over as members come
// and go. When ctx is done it leaves: it drops its membership entry,
// ends every shard's term, waits for the callbacks to return, releases
// the shards and wakes their next owners, within ReleaseTimeout (a
// release the store does not confirm in time expires instead). It
// returns nil then, or, at once, an error wrapping lease.ErrPermanent
// when the store refuses the group's records for good (no such table or
// bucket, access denied). Run may be called once.
func (g *Group) Run(ctx context.Context) error {
	if !g.started.CompareAndSwap(false, true) {
		return errors.New("tenure: Group.Run called twice")
	}
	return g.sh.Run(ctx)
}

// Status returns what this member knows now.
func (g *Group) Status() GroupStatus {
	s := g.sh.Status()
	st := GroupStatus{Group: g.cfg.Name, ID: g.cfg.ID, Key: s.Key, Shards: g.cfg.Shards,
		Held: s.Held, Share: s.Share, Balanced: s.Balanced, Err: s.Err}
	for i, m := range s.Members {
		st.Members = append(st.Members, GroupMember{ID: s.IDs[i], Key: m.Key, Weight: m.Weight})
	}
	return st
}

// LastAnswer returns the local time the store last answered one of this
// member's calls; zero before the first.
func (g *Group) LastAnswer() time.Time { return g.sh.LastAnswer() }
