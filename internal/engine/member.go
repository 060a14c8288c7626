package engine

import (
	"log/slog"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/groupcore"
	"github.com/tenure-go/tenure/internal/host"
)

// Member is a group member's entry on a host.Core: its campaign
// (groupcore.Campaign), whose calls it routes (the membership record's,
// timed out by the Core; each shard's, timed out by the shard's Machine)
// and whose events it passes on. Every method belongs to the host's loop.
type Member struct {
	host.Slot
	core    *host.Core
	fx      MemberEffects
	tap     MemberTap // the simulator's; nil but there
	c       *groupcore.Campaign
	name    string
	timeout time.Duration // the membership call's
	flights map[*host.Flight]int
	onShard []*host.Flight // the call in flight on each shard's record
}

// MemberEffects is what a Member tells the process around it: the
// campaign's events (groupcore.CampaignHost's, but its calls). Every
// method runs on the host's loop, within an event.
type MemberEffects interface {
	Now() time.Time
	Log(level slog.Level, msg string, args ...any)
	MemberEvents
}

// MemberEvents are the events of a group member's campaign.
type MemberEvents interface {
	Assigned(shard int, t election.Term)
	Publish(shard int, s driver.Snapshot)
	Revoked(shard int, t election.Term, r election.Reason)
	Wake(addr string, shard int)
	Changed(live []groupcore.Member)
	Done()
}

// NewMember returns the member cc configures, on core, telling fx.
func NewMember(core *host.Core, fx MemberEffects, cc groupcore.CampaignConfig) (*Member, error) {
	m := &Member{core: core, fx: fx, name: cc.Name, timeout: cc.Lock.OpTimeout, flights: map[*host.Flight]int{}, onShard: make([]*host.Flight, cc.Shards)}
	c, err := groupcore.NewCampaign((*memberHost)(m), cc)
	if err != nil {
		return nil, err
	}
	m.c = c
	return m, nil
}

// Campaign returns the member's campaign.
func (m *Member) Campaign() *groupcore.Campaign { return m.c }

// The host.Entry of the member.

func (m *Member) Due() time.Time     { return m.c.Due() }
func (m *Member) Fire(now time.Time) { m.c.Fire(now) }

func (m *Member) CallDone(f *host.Flight, res election.Result) {
	shard := m.flights[f]
	delete(m.flights, f)
	if shard >= 0 && m.onShard[shard] == f {
		m.onShard[shard] = nil
	}
	m.c.Result(shard, res)
}

// memberHost is a Member's groupcore.CampaignHost.
type memberHost Member

func (h *memberHost) m() *Member { return (*Member)(h) }

func (h *memberHost) Now() time.Time { return h.fx.Now() }

func (h *memberHost) Call(shard int, op election.Op) {
	m := h.m()
	if shard < 0 {
		m.flights[m.core.Call(m, 0, m.name+groupcore.MembersSuffix, op, m.timeout)] = -1
		return
	}
	f := m.core.Call(m, 0, groupcore.ShardName(m.name, shard), op, 0) // the shard's Machine times it out
	m.flights[f], m.onShard[shard] = shard, f
}

func (h *memberHost) Cancel(shard int) {
	h.core.Cancel(h.onShard[shard])
	h.onShard[shard] = nil
}

func (h *memberHost) Log(level slog.Level, msg string, args ...any) { h.fx.Log(level, msg, args...) }

func (h *memberHost) Assigned(shard int, t election.Term) { h.fx.Assigned(shard, t) }

func (h *memberHost) Publish(shard int, s driver.Snapshot) { h.fx.Publish(shard, s) }

func (h *memberHost) Revoked(shard int, t election.Term, r election.Reason) {
	h.fx.Revoked(shard, t, r)
}

func (h *memberHost) Wake(addr string, shard int) { h.fx.Wake(addr, shard) }

func (h *memberHost) Changed(live []groupcore.Member) { h.fx.Changed(live) }

func (h *memberHost) Reschedule() { h.core.Fix(h.m()) }

func (h *memberHost) Done() { h.fx.Done() }
