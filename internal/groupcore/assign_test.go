package groupcore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func members(keys ...string) []Member {
	ms := make([]Member, len(keys))
	for i, k := range keys {
		ms[i] = Member{Key: k, Weight: 1}
	}
	return ms
}

func named(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("member-%d", i)
	}
	return keys
}

// owners maps each shard to its owner's key.
func owners(k int, ms []Member) []string {
	out := make([]string, k)
	for s, i := range Assign(k, ms) {
		out[s] = ms[i].Key
	}
	return out
}

func loads(own []string) map[string]int {
	l := map[string]int{}
	for _, o := range own {
		l[o]++
	}
	return l
}

func moved(a, b []string) int {
	n := 0
	for s := range a {
		if a[s] != b[s] {
			n++
		}
	}
	return n
}

// Every member gets ⌊k/n⌋ or ⌈k/n⌉ shards, whatever k and n.
func TestAssignBalanced(t *testing.T) {
	for n := 1; n <= 20; n++ {
		for _, k := range []int{1, 2, 7, 16, 63, 64, 100, 257} {
			ms := members(named(n)...)
			l := loads(owners(k, ms))
			for _, m := range ms {
				if got := l[m.Key]; got != k/n && got != (k+n-1)/n {
					t.Fatalf("k %d, n %d: %s holds %d", k, n, m.Key, got)
				}
			}
		}
	}
}

// Weights: a member of weight w of W holds ⌊k·w/W⌋ or one more.
func TestAssignWeighted(t *testing.T) {
	ms := []Member{{"a", 1}, {"b", 2}, {"c", 5}, {"d", 0}} // 0 counts as 1
	const k = 64
	l := loads(owners(k, ms))
	for _, m := range ms {
		w := max(m.Weight, 1)
		if want := k * w / 9; l[m.Key] != want && l[m.Key] != want+1 {
			t.Errorf("%s (weight %d): %d shards, want %d or %d", m.Key, w, l[m.Key], want, want+1)
		}
	}
}

// Every view of the same members agrees, whatever their order.
func TestAssignOrderFree(t *testing.T) {
	keys := named(9)
	want := owners(100, members(keys...))
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		if got := owners(100, members(keys...)); !slices.Equal(got, want) {
			t.Fatalf("order %v: another assignment", keys)
		}
	}
}

// A join or a leave moves about k/n shards, not a reshuffle: over 200
// random memberships of each size, the mean is within 1.6×k/n for n ≤ 9
// and 2×k/n up to 17, and no change moves more than 3.5×k/n.
func TestAssignFewMoves(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, k := range []int{64, 256} {
		for _, n := range []int{1, 2, 3, 5, 8, 16} {
			var sum, ideal, worst float64
			for range 200 {
				keys := make([]string, n)
				for i := range keys {
					keys[i] = fmt.Sprintf("pod-%x", r.Uint64())
				}
				small := owners(k, members(keys...))
				big := owners(k, members(append(keys, fmt.Sprintf("pod-%x", r.Uint64()))...))
				m := float64(moved(small, big)) // a join to n+1, or a leave from it
				sum += m
				ideal += float64(k) / float64(n+1)
				worst = max(worst, m/(float64(k)/float64(n+1)))
			}
			mean, limit := sum/ideal, 1.6
			if n+1 > 9 {
				limit = 2
			}
			t.Logf("k %d, %d ↔ %d members: moved/(k/n) mean %.2f, worst %.2f", k, n, n+1, mean, worst)
			if mean > limit || worst > 3.5 {
				t.Errorf("k %d, %d ↔ %d members: moved/(k/n) mean %.2f, worst %.2f", k, n, n+1, mean, worst)
			}
		}
	}
}

func BenchmarkAssign64x8(b *testing.B) {
	ms := members(named(8)...)
	for b.Loop() {
		Assign(64, ms)
	}
}
