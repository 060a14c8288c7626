//go:build linux

package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/groupcore"
	"github.com/tenure-go/tenure/internal/testservers"
)

// onGroupStores runs f on a file store and on every real server: DynamoDB
// Local and each S3 server.
func onGroupStores(t *testing.T, f func(t *testing.T, e *procEnv)) {
	onStores(t, f)
	for _, srv := range testservers.S3Servers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			bucket := testservers.NewBucket(t, srv.Client())
			store := "s3://" + bucket + "/tenure/?region=us-east-1&endpoint=" + srv.Endpoint
			f(t, newProcEnv(t, store, "AWS_ACCESS_KEY_ID="+srv.AccessKey, "AWS_SECRET_ACCESS_KEY="+srv.SecretKey))
		})
	}
}

// shardOf splits a group child's holder ("a@3") into member and shard.
func shardOf(ev event) (member, shard string) {
	member, shard, _ = strings.Cut(ev.holder, "@")
	return member, shard
}

// heldShards returns, per member, the shards whose latest child started
// and has not logged "term", from the log.
func heldShards(evs []event) map[string]map[string]bool {
	owner := map[string]string{} // shard: member running its child
	for _, ev := range evs {
		m, s := shardOf(ev)
		switch ev.what {
		case "start":
			owner[s] = m
		case "term":
			if owner[s] == m {
				delete(owner, s)
			}
		}
	}
	out := map[string]map[string]bool{}
	for s, m := range owner {
		if out[m] == nil {
			out[m] = map[string]bool{}
		}
		out[m][s] = true
	}
	return out
}

// TestProcessGroup: `tenure run --group` runs a child per shard held, with
// the shard and its token; a member that joins takes its share, each shard
// handed over (the old child stopped first); a member killed with kill -9
// takes its children with it, and the survivor runs every shard within the
// group's crash bound; SIGTERM hands every shard over and exits 0. No
// child's fenced write is ever refused.
func TestProcessGroup(t *testing.T) {
	onGroupStores(t, func(t *testing.T, e *procEnv) {
		group := []string{"run", "--group", "ingest", "--shards", "4"}
		a := e.tenure(append(group, "--id", "a")...)
		e.awaitLog(30*time.Second, "a running all 4 shards", func(evs []event) bool { return len(heldShards(evs)["a"]) == 4 })
		b := e.tenure(append(group, "--id", "b")...)
		e.awaitLog(20*time.Second, "2 shards each", func(evs []event) bool {
			h := heldShards(evs)
			return len(h["a"]) == 2 && len(h["b"]) == 2
		})
		// Each shard b runs was stopped at a first.
		evs := e.events()
		for i, ev := range evs {
			if m, s := shardOf(ev); ev.what == "start" && m == "b" {
				stopped := false
				for _, prev := range evs[:i] {
					if pm, ps := shardOf(prev); prev.what == "term" && pm == "a" && ps == s {
						stopped = true
					}
				}
				if !stopped {
					t.Errorf("b started shard %s before a's child for it stopped; log:\n%v", s, evs)
				}
			}
		}
		var aPids []int
		for _, ev := range evs {
			if m, _ := shardOf(ev); ev.what == "start" && m == "a" {
				aPids = append(aPids, ev.pid)
			}
		}
		if err := a.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		bound := groupCrashBound(e.lease)
		e.awaitLog(bound+5*time.Second, "b running all 4 shards", func(evs []event) bool { return len(heldShards(evs)["b"]) == 4 })
		if took := time.Since(killed); took > bound {
			t.Errorf("b ran every shard %v after a was killed; the bound is %v", took, bound)
		}
		for _, pid := range aPids {
			if alive(pid) {
				t.Errorf("a's child %d outlived a", pid)
			}
		}
		if err := b.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := b.Wait(); err != nil {
			t.Errorf("b after SIGTERM: %v, want exit 0", err)
		}
		terms := 0
		for _, ev := range e.events() {
			if m, _ := shardOf(ev); ev.what == "term" && m == "b" {
				terms++
			}
			if ev.what == "refused" {
				t.Errorf("a fenced write was refused: %v", ev)
			}
		}
		if terms != 4 {
			t.Errorf("%d of b's 4 children got SIGTERM", terms)
		}
	})
}

// groupCrashBound is how long after a member's crash its shards run
// elsewhere: the group's bound (docs/groups.md), and a second for the
// processes.
func groupCrashBound(ttl time.Duration) time.Duration {
	return groupcore.NewBounds(election.Timing{LeaseDuration: ttl}, 4, 2, 50*time.Millisecond).CrashTakeover + time.Second
}
