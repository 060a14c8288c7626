package groupcore

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-go/tenure/lease"
)

// The membership record (NAME + MembersSuffix) lists the live members, one
// line each: "KEY SEQ", "KEY SEQ WEIGHT" or "KEY SEQ WEIGHT ADDR", ADDR the
// member's wake-up address (an IP address and port packed as "@" and 8 or
// 24 base64 digits, or a host:port as given). Each member rewrites it by
// compare-and-swap once a heartbeat, adding 1 to its SEQ; any member drops
// an entry whose SEQ it has seen unchanged for ttl·(1+ρ) on its own clock,
// as a lock's takeover waits, never comparing clocks. Nothing in it is an
// authority: a member who believes another dead only moves its idea of who
// should own a shard, and every shard is still taken by the lock rules.
const MembersSuffix = "::members"

// MaxMembers is how many members a group's membership record holds: each
// entry takes at most 23 bytes of lease.MaxPayloadLen without a wake-up
// address, 33 with an IPv4 one (so 31 members at the longest), 49 with
// an IPv6 one (20).
const MaxMembers = 40

// seqMod bounds SEQ to four base-36 digits; it wraps, and only a change
// of it matters.
const seqMod = 36 * 36 * 36 * 36

// MaxWeight bounds a member's weight (four digits in its entry).
const MaxWeight = 9999

// Key returns the key a member of ID id goes by in the membership record
// and in Assign: 12 hex digits of the ID's SHA-256, short enough for
// MaxMembers entries in one record whatever the IDs' length (a collision
// between two members of a group has odds of about n²/2⁴⁹).
func Key(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:6])
}

// Entry is one member's line in the membership record.
type Entry struct {
	Key    string
	Seq    uint32
	Weight int    // 1 unless the member declared a capacity
	Addr   string // where it listens for wake-ups; "" nowhere
}

// Encode returns the record's payload for entries, sorted by key. It fails
// with more than MaxMembers entries or a malformed one.
func Encode(entries []Entry) ([]byte, error) {
	if len(entries) > MaxMembers {
		return nil, fmt.Errorf("%d members, at most %d in a group", len(entries), MaxMembers)
	}
	es := slices.Clone(entries)
	slices.SortFunc(es, func(a, b Entry) int { return strings.Compare(a.Key, b.Key) })
	var b strings.Builder
	for _, e := range es {
		if len(e.Key) != 12 || strings.ContainsAny(e.Key, " \n") {
			return nil, fmt.Errorf("member key %q: not a Key", e.Key)
		}
		if e.Weight < 1 || e.Weight > MaxWeight {
			return nil, fmt.Errorf("member %s: weight %d outside [1, %d]", e.Key, e.Weight, MaxWeight)
		}
		b.WriteString(e.Key)
		b.WriteByte(' ')
		b.WriteString(strconv.FormatUint(uint64(e.Seq%seqMod), 36))
		if e.Weight != 1 || e.Addr != "" {
			b.WriteByte(' ')
			b.WriteString(strconv.Itoa(e.Weight))
		}
		if e.Addr != "" {
			a, err := packAddr(e.Addr)
			if err != nil {
				return nil, fmt.Errorf("member %s: %w", e.Key, err)
			}
			b.WriteByte(' ')
			b.WriteString(a)
		}
		b.WriteByte('\n')
	}
	if b.Len() > lease.MaxPayloadLen {
		return nil, fmt.Errorf("membership record of %d bytes, at most %d", b.Len(), lease.MaxPayloadLen)
	}
	return []byte(b.String()), nil
}

// Decode reads a membership record's payload. A line it cannot read is an
// error: the record is another version's, or not a membership record.
func Decode(payload []byte) ([]Entry, error) {
	var out []Entry
	for line := range strings.Lines(string(payload)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		bad := fmt.Errorf("membership record: line %q: want KEY SEQ [WEIGHT [ADDR]]", strings.TrimSpace(line))
		if len(f) < 2 || len(f) > 4 || len(f[0]) != 12 {
			return nil, bad
		}
		seq, err := strconv.ParseUint(f[1], 36, 32)
		if err != nil {
			return nil, bad
		}
		e := Entry{Key: f[0], Seq: uint32(seq), Weight: 1}
		if len(f) >= 3 {
			if e.Weight, err = strconv.Atoi(f[2]); err != nil || e.Weight < 1 || e.Weight > MaxWeight {
				return nil, bad
			}
		}
		if len(f) == 4 {
			if e.Addr, err = unpackAddr(f[3]); err != nil {
				return nil, bad
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// Beat returns entries with self's entry added, or its SEQ moved on (and
// its weight set), and the entries of dead removed.
func Beat(entries []Entry, self Entry, dead []string) []Entry {
	out := make([]Entry, 0, len(entries)+1)
	found := false
	for _, e := range entries {
		switch {
		case e.Key == self.Key:
			found = true
			out = append(out, Entry{Key: e.Key, Seq: (e.Seq + 1) % seqMod, Weight: self.Weight, Addr: self.Addr})
		case !slices.Contains(dead, e.Key):
			out = append(out, e)
		}
	}
	if !found {
		out = append(out, Entry{Key: self.Key, Seq: self.Seq % seqMod, Weight: self.Weight, Addr: self.Addr})
	}
	return out
}

// View is one member's idea of who is alive, from the membership records
// it reads: an entry is alive until its SEQ has stayed the same for Wait,
// timed on this member's clock from when it first saw that SEQ.
//
// An entry is confirmed once this member has seen its SEQ move, or first
// saw it in a record its own member wrote: a member that beats. An entry
// that is not (a ghost: written by no member, or by one that died before
// it beat again) may count in the plan, but a held shard is never handed
// to it, and a full record drops it first.
type View struct {
	Wait time.Duration // ttl·(1+ρ) of the membership heartbeat
	seen map[string]seen
}

type seen struct {
	seq    uint32
	weight int
	addr   string
	since  time.Time // first seen with this seq
	ok     bool      // confirmed: seen to beat
}

// Observe takes the entries of a record read (or written) at now, whose
// writer's key is writer ("" if unknown). Entries no longer in the record
// are forgotten.
func (v *View) Observe(now time.Time, entries []Entry, writer string) {
	if v.seen == nil {
		v.seen = make(map[string]seen, len(entries))
	}
	keep := make(map[string]bool, len(entries))
	for _, e := range entries {
		keep[e.Key] = true
		if s, ok := v.seen[e.Key]; !ok || s.seq != e.Seq {
			v.seen[e.Key] = seen{seq: e.Seq, weight: e.Weight, addr: e.Addr, since: now, ok: ok || e.Key == writer}
		} else if s.weight != e.Weight || s.addr != e.Addr {
			s.weight, s.addr = e.Weight, e.Addr
			v.seen[e.Key] = s
		}
	}
	for k := range v.seen {
		if !keep[k] {
			delete(v.seen, k)
		}
	}
}

// Live returns the members alive at now, sorted by key.
func (v *View) Live(now time.Time) []Member {
	var out []Member
	for k, s := range v.seen {
		if now.Sub(s.since) < v.Wait {
			out = append(out, Member{Key: k, Weight: s.weight})
		}
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// Dead returns the keys whose entries have stayed the same for Wait at
// now, sorted: a member may drop them from the record.
func (v *View) Dead(now time.Time) []string {
	var out []string
	for k, s := range v.seen {
		if now.Sub(s.since) >= v.Wait {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Confirmed reports whether the entry of key has been seen to beat.
func (v *View) Confirmed(key string) bool { return v.seen[key].ok }

// Unconfirmed returns the keys of the entries not seen to beat, sorted.
func (v *View) Unconfirmed() []string {
	var out []string
	for k, s := range v.seen {
		if !s.ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Silent returns how long at now the entry of key has stayed the same, and
// whether it is known.
func (v *View) Silent(now time.Time, key string) (time.Duration, bool) {
	s, ok := v.seen[key]
	return now.Sub(s.since), ok
}

// Addr returns the wake-up address of the member of key as last seen; ""
// if none.
func (v *View) Addr(key string) string { return v.seen[key].addr }

// packAddr writes a wake-up address for the record: an IP address and
// port as "@" and the base64 of their bytes, anything else (a host name
// and port) as it is, if it has no space.
func packAddr(addr string) (string, error) {
	if ap, err := netip.ParseAddrPort(addr); err == nil && ap.Addr().Zone() == "" {
		b := ap.Addr().Unmap().AsSlice()
		b = binary.BigEndian.AppendUint16(b, ap.Port())
		return "@" + base64.RawURLEncoding.EncodeToString(b), nil
	}
	if addr == "" || strings.ContainsAny(addr, " \n\t@") || len(addr) > 255 {
		return "", fmt.Errorf("wake-up address %q: not host:port", addr)
	}
	return addr, nil
}

func unpackAddr(s string) (string, error) {
	p, ok := strings.CutPrefix(s, "@")
	if !ok {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return "", err
		}
		return s, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil || len(b) != 6 && len(b) != 18 {
		return "", fmt.Errorf("wake-up address %q: not packed", s)
	}
	ip, _ := netip.AddrFromSlice(b[:len(b)-2])
	return netip.AddrPortFrom(ip, binary.BigEndian.Uint16(b[len(b)-2:])).String(), nil
}
