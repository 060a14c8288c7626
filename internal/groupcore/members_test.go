package groupcore

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMembersRoundTrip(t *testing.T) {
	var es []Entry
	for i := range MaxMembers {
		es = append(es, Entry{Key: Key(fmt.Sprintf("a-very-long-pod-name-7d9f8b6c4d-x2x9z-%d", i)), Seq: seqMod - 1, Weight: MaxWeight})
	}
	b, err := Encode(es)
	if err != nil {
		t.Fatalf("MaxMembers entries at their longest: %v", err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(es, func(a, b Entry) int { return strings.Compare(a.Key, b.Key) })
	if !slices.Equal(got, es) {
		t.Fatalf("round trip: %v, want %v", got, es)
	}
	if _, err := Encode(append(es, Entry{Key: Key("one more"), Weight: 1})); err == nil {
		t.Fatal("MaxMembers+1 entries encoded")
	}
	plain, _ := Encode([]Entry{{Key: Key("a"), Seq: 35, Weight: 1}})
	if want := Key("a") + " z\n"; string(plain) != want {
		t.Fatalf("weight 1: %q, want %q", plain, want)
	}
	for _, bad := range []string{"short 1\n", Key("a") + "\n", Key("a") + " 1 2 3\n", Key("a") + " 1 2 @AAA\n", Key("a") + " 1 2 h:1 4\n", Key("a") + " 1 0\n", Key("a") + " !\n"} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%q): no error", bad)
		}
	}
}

// Wake-up addresses ride in the entries: IP addresses packed, so that 31
// members with IPv4 ones (20 with IPv6) fit at their longest.
func TestMembersAddrs(t *testing.T) {
	for _, c := range []struct {
		n    int
		addr string
	}{{31, "255.255.255.255:65535"}, {20, "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"}, {2, "pod-0.ingest.svc:7946"}} {
		var es []Entry
		for i := range c.n {
			es = append(es, Entry{Key: Key(fmt.Sprint(i)), Seq: seqMod - 1, Weight: MaxWeight, Addr: c.addr})
		}
		b, err := Encode(es)
		if err != nil {
			t.Fatalf("%d entries with %s: %v", c.n, c.addr, err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range got {
			if e.Addr != c.addr {
				t.Fatalf("address %q came back as %q", c.addr, e.Addr)
			}
		}
	}
	if _, err := Encode([]Entry{{Key: Key("a"), Weight: 1, Addr: "no port"}}); err == nil {
		t.Fatal("an address with a space encoded")
	}
}

func TestBeat(t *testing.T) {
	a, b, c := Key("a"), Key("b"), Key("c")
	es := Beat(nil, Entry{Key: a, Weight: 1}, nil)
	es = Beat(es, Entry{Key: b, Seq: 7, Weight: 2}, nil)
	es = Beat(es, Entry{Key: c, Weight: 1}, nil)
	es = Beat(es, Entry{Key: a, Weight: 3}, []string{b})
	want := []Entry{{Key: a, Seq: 1, Weight: 3}, {Key: c, Seq: 0, Weight: 1}}
	if !slices.Equal(es, want) {
		t.Fatalf("entries %v, want %v", es, want)
	}
	if es := Beat([]Entry{{Key: a, Seq: seqMod - 1, Weight: 1}}, Entry{Key: a, Weight: 1}, nil); es[0].Seq != 0 {
		t.Fatalf("SEQ after the last: %d, want 0", es[0].Seq)
	}
}

// A member is alive until its SEQ has stayed the same for Wait on the
// observer's clock, from when the observer first saw that SEQ.
func TestViewLiveness(t *testing.T) {
	a, b := Key("a"), Key("b")
	t0 := time.Unix(1000, 0)
	v := View{Wait: 10 * time.Second}
	v.Observe(t0, []Entry{{Key: a, Seq: 1, Weight: 1}, {Key: b, Seq: 1, Weight: 2}}, "")
	v.Observe(t0.Add(6*time.Second), []Entry{{Key: a, Seq: 2, Weight: 1}, {Key: b, Seq: 1, Weight: 2}}, "")
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	if live := v.Live(at(9 * time.Second)); len(live) != 2 || live[slices.IndexFunc(live, func(m Member) bool { return m.Key == b })].Weight != 2 {
		t.Fatalf("at 9s: %v, want both, b of weight 2", live)
	}
	if live, dead := v.Live(at(10*time.Second)), v.Dead(at(10*time.Second)); len(live) != 1 || live[0].Key != a || !slices.Equal(dead, []string{b}) {
		t.Fatalf("at 10s: live %v, dead %v; want a alive, b dead", live, dead)
	}
	if d, ok := v.Silent(at(10*time.Second), a); !ok || d != 4*time.Second {
		t.Fatalf("a silent %v %v, want 4s", d, ok)
	}
	v.Observe(at(11*time.Second), []Entry{{Key: a, Seq: 2, Weight: 1}}, "")
	if _, ok := v.Silent(at(11*time.Second), b); ok {
		t.Fatal("b, gone from the record, is still known")
	}
}

// An entry is confirmed once its SEQ is seen to move, or when it is first
// seen in a record its own member wrote; a ghost (written by someone else,
// never moving) stays unconfirmed, and so does an entry seen anew after
// it left the record.
func TestViewConfirmsMembersThatBeat(t *testing.T) {
	a, b, g := Key("a"), Key("b"), Key("ghost")
	t0 := time.Unix(1000, 0)
	v := View{Wait: 10 * time.Second}
	v.Observe(t0, []Entry{{Key: a, Seq: 1, Weight: 1}, {Key: b, Seq: 4, Weight: 1}, {Key: g, Seq: 9, Weight: 9999}}, b)
	if v.Confirmed(a) || !v.Confirmed(b) || v.Confirmed(g) {
		t.Fatalf("first read, written by b: a %v, b %v, ghost %v; want b alone", v.Confirmed(a), v.Confirmed(b), v.Confirmed(g))
	}
	v.Observe(t0.Add(2*time.Second), []Entry{{Key: a, Seq: 2, Weight: 1}, {Key: b, Seq: 4, Weight: 1}, {Key: g, Seq: 9, Weight: 9999}}, a)
	if !v.Confirmed(a) || !v.Confirmed(b) || v.Confirmed(g) || !slices.Equal(v.Unconfirmed(), []string{g}) {
		t.Fatalf("a beat: a %v, b %v, ghost %v (unconfirmed %v)", v.Confirmed(a), v.Confirmed(b), v.Confirmed(g), v.Unconfirmed())
	}
	v.Observe(t0.Add(4*time.Second), []Entry{{Key: b, Seq: 5, Weight: 1}}, b)
	v.Observe(t0.Add(6*time.Second), []Entry{{Key: a, Seq: 3, Weight: 1}, {Key: b, Seq: 5, Weight: 1}}, b)
	if v.Confirmed(a) {
		t.Fatal("a, back in the record after it was dropped, is confirmed before it beats again")
	}
}
