package groupcore

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease/memlease"
)

// mhost runs one Membership's calls at once on a shared memlease, on a
// clock the test moves.
type mhost struct {
	t       *testing.T
	m       *Membership
	clock   *time.Time
	store   *memlease.Store
	pending *election.Op
	changes [][]Member
	calls   int
}

func (h *mhost) Now() time.Time                            { return *h.clock }
func (h *mhost) Call(op election.Op)                       { h.pending = &op; h.calls++ }
func (h *mhost) Log(_ slog.Level, msg string, args ...any) { h.t.Log(append([]any{msg}, args...)...) }
func (h *mhost) Changed(live []Member)                     { h.changes = append(h.changes, live) }

// run answers the calls the Membership makes until it waits on its timer.
func (h *mhost) run() {
	h.m.Fire(*h.clock)
	for h.pending != nil {
		op := *h.pending
		h.pending = nil
		res := election.Result{ID: op.ID}
		ctx := context.Background()
		if op.Kind == election.OpGet {
			res.Record, res.Version, res.Err = h.store.Get(ctx, h.m.name)
		} else {
			op.Record.WrittenAt = *h.clock
			res.Version, res.Err = h.store.Put(ctx, h.m.name, op.Record, op.Expect)
		}
		h.m.Result(res)
		h.m.Fire(*h.clock)
	}
}

// threeMembers returns the Memberships of a, b and c in the group
// "ingest" on store, at the time *now.
func threeMembers(t *testing.T, store *memlease.Store, now *time.Time, timing election.Timing) map[string]*mhost {
	hosts := map[string]*mhost{}
	for i, id := range []string{"a", "b", "c"} {
		h := &mhost{t: t, clock: now, store: store}
		h.m = NewMembership(h, "ingest", id, 1, timing, rand.New(rand.NewPCG(uint64(i), 1)))
		hosts[id] = h
	}
	return hosts
}

func keys(ms []Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Key)
	}
	return out
}

// Three members beat; each sees all three. One stops beating: the others
// find it dead once its entry stayed the same for ttl·(1+ρ) and drop it
// from the record. One leaves: the other sees it gone at its next beat.
func TestMembership(t *testing.T) {
	store, now, timing := memlease.New(), time.Unix(1e9, 0), election.Timing{LeaseDuration: 10 * time.Second}.WithDefaults()
	hosts := threeMembers(t, store, &now, timing)
	beat := func(ids ...string) {
		for _, id := range ids {
			hosts[id].run()
		}
	}
	all := []string{Key("a"), Key("b"), Key("c")}
	slices.Sort(all)
	for range 2 {
		beat("a", "b", "c")
		now = now.Add(timing.RenewInterval)
	}
	if got := keys(hosts["a"].m.Live()); !slices.Equal(got, all) {
		t.Fatalf("a sees %v, want %v", got, all)
	}
	// c stops after its beat at 2s, which a first sees at 4s: a and b
	// beat on past 14.01s.
	for i := range 7 {
		if i == 6 && len(hosts["a"].m.Live()) != 3 {
			t.Fatalf("at 14s, c not yet silent for 10.01s: a sees %v", hosts["a"].m.Live())
		}
		beat("a", "b")
		now = now.Add(timing.RenewInterval)
	}
	want := []string{Key("a"), Key("b")}
	slices.Sort(want)
	for _, id := range []string{"a", "b"} {
		if got := keys(hosts[id].m.Live()); !slices.Equal(got, want) {
			t.Fatalf("after c went silent, %s sees %v, want %v", id, got, want)
		}
	}
	rec, _, _ := store.Get(context.Background(), "ingest"+MembersSuffix)
	if es, _ := Decode(rec.Payload); len(es) != 2 {
		t.Fatalf("record %q: c's entry not dropped", rec.Payload)
	}
	// b leaves.
	hosts["b"].m.Leave()
	beat("b")
	if !hosts["b"].m.Done() {
		t.Fatal("b not done after leaving")
	}
	beat("a")
	if got := keys(hosts["a"].m.Live()); !slices.Equal(got, []string{Key("a")}) {
		t.Fatalf("after b left, a sees %v", got)
	}
	// Cost: a read and a write a beat with others around.
	h := hosts["a"]
	before := h.calls
	now = now.Add(timing.RenewInterval)
	beat("a")
	if n := h.calls - before; n != 1 {
		t.Fatalf("a lone member's beat: %d calls, want 1 (a write)", n)
	}
}

// A record written by someone else (a forger, a restore by hand) in place
// of the members': 40 ghosts that never beat. The first member to read it
// finds its own entry gone while its beats work, so it puts back the
// entries it knew, and the record being full, drops the ghosts (never seen
// to beat) to make room: the members' views never lose anyone, and the
// record holds the three again at once.
func TestMembershipRestoresAForgedRecord(t *testing.T) {
	store, now, timing := memlease.New(), time.Unix(1e9, 0), election.Timing{LeaseDuration: 10 * time.Second}.WithDefaults()
	hosts := threeMembers(t, store, &now, timing)
	beat := func() {
		for _, id := range []string{"a", "b", "c"} {
			hosts[id].run()
		}
		now = now.Add(timing.RenewInterval)
	}
	beat()
	beat()
	ctx := context.Background()
	name := "ingest" + MembersSuffix
	rec, ver, _ := store.Get(ctx, name)
	var ghosts []Entry
	for i := range MaxMembers {
		ghosts = append(ghosts, Entry{Key: Key("ghost-" + strconv.Itoa(i)), Seq: 3, Weight: 1})
	}
	rec.Payload, _ = Encode(ghosts)
	rec.Holder = "forger"
	if _, err := store.Put(ctx, name, rec, ver); err != nil {
		t.Fatal(err)
	}
	changes := len(hosts["b"].changes)
	beat()
	rec, _, _ = store.Get(ctx, name)
	es, err := Decode(rec.Payload)
	if err != nil || len(es) != 3 {
		t.Fatalf("after a beat over the forged record: %q (%v), want the three members", rec.Payload, err)
	}
	all := []string{Key("a"), Key("b"), Key("c")}
	slices.Sort(all)
	for _, id := range []string{"a", "b", "c"} {
		if got := keys(hosts[id].m.Live()); !slices.Equal(got, all) {
			t.Fatalf("%s sees %v, want %v", id, got, all)
		}
	}
	if got := hosts["b"].changes[changes:]; len(got) != 0 {
		t.Fatalf("b saw the live members change: %v", got)
	}
}
