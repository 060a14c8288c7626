package groupcore

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/scripttest"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/memlease"
)

// A group's rules are told as scripts in testdata/, one file per
// behaviour (internal/scripttest: a command, then what the members did
// meanwhile, one line each). Every member is of the group "ingest", of 4 shards unless `shards N` says
// otherwise first, on one memlease store that answers each call at once,
// with the default timing (a 10s lease, a beat every 2s). Commands:
//
//	shards N             before the first member: the group's shards
//	join ID [weight=W]   a member starts (its callbacks return at once)
//	advance D            let D pass: every timer due fires, every call is
//	                     answered, at the instant it is due
//	leave ID             the member leaves: hands its shards over, drops
//	                     its entry
//	crash ID             the member stops answering and firing
//	ghosts N [weight=W] [beside]
//	                     someone else writes the membership record: N
//	                     entries that no member beats for (of weight W),
//	                     in place of the members' (beside: with them)
//
// Each output line is "T ID what": T the time since the script began, and
// what the member told its host: a shard assigned or revoked (and why),
// a wake-up sent, the live members as it sees them (by ID; entries no
// member of the script wrote are counted as unnamed), or that it is done.
//
// go test ./internal/groupcore -run Scripts -rewrite writes the outputs
// anew (internal/scripttest); read the diff before committing it.
func TestScripts(t *testing.T) {
	scripttest.Run(t, func(t *testing.T) func(string) string {
		w := &scriptWorld{t: t, store: memlease.New(), clk: scripttest.NewClock(time.Unix(1_767_225_600, 0)), shards: 4, members: map[string]*scriptMember{}, names: map[string]string{}}
		return func(cmd string) string {
			w.do(cmd)
			return w.clk.Step()
		}
	})
}

// scriptWorld runs the members of a script on one store and one clock.
type scriptWorld struct {
	t       *testing.T
	store   *memlease.Store
	clk     *scripttest.Clock
	shards  int
	members map[string]*scriptMember
	order   []string          // the members by their start
	names   map[string]string // key → ID, for the log
}

// scriptMember is one member and its CampaignHost.
type scriptMember struct {
	w        *scriptWorld
	id       string
	m        *Campaign
	calls    []scriptCall // in flight, answered in order
	returned []int        // shards whose callbacks are to return
	dead     bool
}

type scriptCall struct {
	shard int
	op    election.Op
}

func (w *scriptWorld) do(cmd string) {
	f := strings.Fields(cmd)
	switch f[0] {
	case "shards":
		n, err := strconv.Atoi(f[1])
		if err != nil {
			w.t.Fatal(err)
		}
		w.shards = n
	case "join":
		weight := 1
		for _, a := range f[2:] {
			if v, ok := strings.CutPrefix(a, "weight="); ok {
				weight, _ = strconv.Atoi(v)
			}
		}
		s := &scriptMember{w: w, id: f[1]}
		lc := &election.Config{ID: f[1], Timing: election.Timing{}.WithDefaults(), Rand: rand.New(rand.NewPCG(uint64(len(w.members)), 7)), Wall: func() time.Time { return w.clk.Now }}
		m, err := NewCampaign(s, CampaignConfig{Name: "ingest", Shards: w.shards, ID: f[1], Weight: weight, Lock: lc})
		if err != nil {
			w.t.Fatal(err)
		}
		s.m = m
		w.members[s.id] = s
		w.order = append(w.order, s.id)
		w.names[Key(s.id)] = s.id
		m.Start()
		w.advance(w.clk.Now)
	case "advance":
		d, err := time.ParseDuration(f[1])
		if err != nil {
			w.t.Fatal(err)
		}
		w.advance(w.clk.Now.Add(d))
	case "leave":
		w.members[f[1]].m.Leave()
		w.advance(w.clk.Now)
	case "crash":
		w.members[f[1]].dead = true
	case "ghosts":
		n, err := strconv.Atoi(f[1])
		if err != nil {
			w.t.Fatal(err)
		}
		weight := 1
		for _, a := range f[2:] {
			if v, ok := strings.CutPrefix(a, "weight="); ok {
				weight, _ = strconv.Atoi(v)
			}
		}
		ctx, name := context.Background(), "ingest"+MembersSuffix
		old, ver, err := w.store.Get(ctx, name)
		if err != nil {
			w.t.Fatal(err)
		}
		var es []Entry
		if slices.Contains(f, "beside") {
			if es, err = Decode(old.Payload); err != nil {
				w.t.Fatal(err)
			}
		}
		for i := range n {
			es = append(es, Entry{Key: Key("ghost-" + strconv.Itoa(i)), Seq: 7, Weight: weight})
		}
		payload, err := Encode(es)
		if err != nil {
			w.t.Fatal(err)
		}
		rec := lease.Record{Holder: "forger", Token: 1, Duration: 10 * time.Second, Nonce: "ghosts", Payload: payload, WrittenAt: w.clk.Now}
		if _, err := w.store.Put(ctx, name, rec, ver); err != nil {
			w.t.Fatal(err)
		}
	default:
		w.t.Fatalf("unknown command %q", cmd)
	}
}

// advance fires every timer due until until, earliest first, answering
// the calls each makes at its instant.
func (w *scriptWorld) advance(until time.Time) {
	w.clk.Advance(until, w.settle, func() []scripttest.Timed {
		var out []scripttest.Timed
		for _, id := range w.order {
			if s := w.members[id]; !s.dead {
				out = append(out, s.m)
			}
		}
		return out
	})
}

// settle answers every call in flight, and returns every revoked shard's
// callbacks, at once, until nothing is left.
func (w *scriptWorld) settle() {
	for progress := true; progress; {
		progress = false
		for _, id := range w.order {
			s := w.members[id]
			if s.dead {
				continue
			}
			if len(s.returned) > 0 {
				i := s.returned[0]
				s.returned = s.returned[1:]
				s.m.Returned(i)
				progress = true
				continue
			}
			if len(s.calls) == 0 {
				continue
			}
			c := s.calls[0]
			s.calls = s.calls[1:]
			s.answer(c)
			progress = true
		}
	}
}

func (s *scriptMember) answer(c scriptCall) {
	name := "ingest" + MembersSuffix
	if c.shard >= 0 {
		name = ShardName("ingest", c.shard)
	}
	res := election.Result{ID: c.op.ID, Record: c.op.Record}
	ctx := context.Background()
	if c.op.Kind == election.OpGet {
		res.Record, res.Version, res.Err = s.w.store.Get(ctx, name)
	} else {
		res.Version, res.Err = s.w.store.Put(ctx, name, c.op.Record, c.op.Expect)
	}
	s.m.Result(c.shard, res)
}

// The CampaignHost of a script's member.

func (s *scriptMember) Now() time.Time { return s.w.clk.Now }
func (s *scriptMember) Call(shard int, op election.Op) {
	s.calls = append(s.calls, scriptCall{shard, op})
}
func (s *scriptMember) Cancel(shard int) {
	s.calls = slices.DeleteFunc(s.calls, func(c scriptCall) bool { return c.shard == shard })
}
func (s *scriptMember) Log(slog.Level, string, ...any) {}
func (s *scriptMember) Assigned(shard int, t election.Term) {
	s.w.clk.Note(s.id, "assigned %d token=%d", shard, t.Token)
}
func (s *scriptMember) Publish(int, driver.Snapshot) {}
func (s *scriptMember) Revoked(shard int, _ election.Term, r election.Reason) {
	s.w.clk.Note(s.id, "revoked %d: %v", shard, r)
	s.returned = append(s.returned, shard)
}
func (s *scriptMember) Wake(addr string, shard int) {
	s.w.clk.Note(s.id, "wake %s for %d", addr, shard)
}
func (s *scriptMember) Changed(live []Member) {
	var ids []string
	unnamed := 0
	for _, m := range live {
		id, ok := s.w.names[m.Key]
		if !ok {
			unnamed++
			continue
		}
		if m.Weight != 1 {
			id += "×" + strconv.Itoa(m.Weight)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if unnamed > 0 {
		ids = append(ids, fmt.Sprintf("and %d unnamed", unnamed))
	}
	s.w.clk.Note(s.id, "members %s", strings.Join(ids, " "))
}
func (s *scriptMember) Reschedule() {}
func (s *scriptMember) Done()       { s.w.clk.Note(s.id, "done") }
