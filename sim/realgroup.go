package sim

import (
	"context"
	"fmt"
	"net"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/engine"
	"github.com/tenure-go/tenure/internal/groupcore"
)

// realMember is a group member of the real tier: a tenure.Group, whose
// shards' callbacks hold each shard until its context ends. Its events
// reach the group member of the fast tier's code (memberFx) through the
// engine's tap, on the Group's loop.
type realMember struct {
	realProc
	g *groupMember
	// The shards revoked whose callbacks have not yet returned, in the
	// order revoked, and for each a channel closed when its turn to return
	// comes: the callbacks hand the shards back one at a time, in that
	// order, as the fast tier has them (guarded by world.mu).
	queue []int
	turns map[int]chan struct{}
}

func newRealMember(p realProc) *realMember {
	r := &realMember{realProc: p, turns: map[int]chan struct{}{}}
	r.g = &groupMember{in: p.in, w: p.in.w, real: true}
	return r
}

// TapMember: the store hands the Group the member's tap.
func (s realStore) TapMember() engine.MemberTap { return memberTap{s.in.rt.(*realMember)} }

func (r *realMember) start() {
	in := r.in
	w := in.w
	w.chk.gjoined = w.now
	w.chk.gstarts++
	cfg := tenure.GroupConfig{
		Store: w.storeOf(in), Name: groupName, Shards: w.plan.Group.Shards, Watch: w.plan.Group.Watch,
		Timing:      in.timing,
		Runtime:     tenure.Runtime{ID: in.ID, Clock: realClock{in, srcRunner}, Rand: w.machineRand(in), WakeAddr: tenure.NoWake},
		StrongPolls: !w.plan.StaleReads,
		OnAssigned:  func(ctx context.Context, _ tenure.Shard) { <-ctx.Done() },
		OnRevoked: func(s tenure.Shard, _ tenure.DemotionReason) {
			w.mu.Lock()
			turn := r.turns[s.ID]
			w.mu.Unlock()
			<-turn
		},
	}
	if w.plan.Wake != nil {
		// A member publishes host:port: the ID as the host, as the fast
		// tier does.
		cfg.WakeAddr, cfg.WakeAdvertise = net.JoinHostPort(in.ID, "1"), net.JoinHostPort(in.ID, "1")
	}
	g, err := tenure.NewGroup(cfg)
	if err != nil {
		panic(fmt.Sprintf("sim: %s: %v", in.label, err))
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { // owned by the world: it waits for every instance's itRunDone
		s := ""
		if err := g.Run(ctx); err != nil {
			s = err.Error()
		}
		w.stage(item{in: in, src: srcRun, kind: itRunDone, s: s})
	}()
}

func (r *realMember) stop() {
	if !r.in.w.ending {
		r.in.w.chk.gstops++
	}
	r.cancel()
}

// memberTap is the engine's tap on a real Group: what its member does,
// told to the group member under the world's lock, as the fast tier tells
// it what the member it steps does (memberFx). A dead process's goroutines
// wind down unseen.
type memberTap struct{ r *realMember }

func (t memberTap) fx() *memberFx { return (*memberFx)(t.r.g) }

func (t memberTap) Assigned(shard int, tm election.Term) {
	defer t.r.release()
	if t.r.hold() {
		t.fx().Assigned(shard, tm)
	}
}

func (t memberTap) Publish(shard int, s driver.Snapshot) {
	defer t.r.release()
	if t.r.hold() {
		t.fx().Publish(shard, s)
	}
}

func (t memberTap) Revoked(shard int, tm election.Term, reason election.Reason) {
	defer t.r.release()
	if t.r.hold() {
		t.fx().Revoked(shard, tm, reason)
	}
	r := t.r
	turn := make(chan struct{})
	if len(r.queue) == 0 {
		close(turn)
	}
	r.queue = append(r.queue, shard)
	r.turns[shard] = turn
}

func (t memberTap) Returned(shard int) {
	defer t.r.release()
	t.r.hold()
	r := t.r
	if len(r.queue) == 0 || r.queue[0] != shard {
		panic(fmt.Sprintf("sim: %s: shard %d returned out of turn (%v)", r.in.label, shard, r.queue))
	}
	r.queue = r.queue[1:]
	delete(r.turns, shard)
	if len(r.queue) > 0 {
		close(r.turns[r.queue[0]])
	}
}

func (t memberTap) Wake(addr string, shard int) {
	defer t.r.release()
	if t.r.hold() {
		t.fx().Wake(addr, shard)
	}
}

func (t memberTap) Changed(live []groupcore.Member) {
	defer t.r.release()
	if t.r.hold() {
		t.fx().Changed(live)
	}
}

func (t memberTap) Done() {}

func (t memberTap) Woken(shard int) {
	defer t.r.release()
	if t.r.hold() {
		t.r.g.tookWake(shard)
	}
}
