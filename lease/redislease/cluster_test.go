package redislease_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/leasetest"
	"github.com/tenure-go/tenure/lease/redislease"
)

// TestIntegrationCluster: on a Redis Cluster of three primaries (each
// lease one key, so one slot), the store passes the suite, the feed's
// events included (a script's PUBLISH reaches a subscriber on another
// node), and List finds the leases on every primary.
func TestIntegrationCluster(t *testing.T) {
	var nodes []*testservers.Server
	for range 3 {
		nodes = append(nodes, testservers.StartRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"))
	}
	ctx, cancel := context.WithTimeout(t.Context(), testservers.SetupTimeout)
	defer cancel()
	const slots = 16384
	for i, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr})
		defer c.Close()
		from, to := i*slots/len(nodes), (i+1)*slots/len(nodes)-1
		if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", from, to).Err(); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			host, port, _ := strings.Cut(n.Addr, ":")
			first := redis.NewClient(&redis.Options{Addr: nodes[0].Addr})
			defer first.Close()
			if err := first.Do(ctx, "CLUSTER", "MEET", host, port).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The nodes gossip until each knows every slot's owner.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for _, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr})
		defer c.Close()
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:3") {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the cluster did not form: %q, %v", info, err)
			case <-tick.C:
			}
		}
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].Addr}, MaxRetries: -1, ContextTimeoutEnabled: true})
	defer cc.Close()
	s, err := redislease.New(cc, redislease.Config{})
	if err != nil {
		t.Fatal(err)
	}
	leasetest.Run(t, func(t *testing.T) lease.Store { return s })

	// Leases spread over the three primaries, all listed.
	want := map[string]bool{}
	rec := lease.Record{Holder: "a", Token: 1, Duration: time.Second, Nonce: "n"}
	for _, name := range []string{"list/a", "list/b", "list/c", "list/d", "list/e", "list/f", "list/g", "list/h"} {
		if _, err := s.Put(ctx, name, rec, lease.NoVersion); err != nil {
			t.Fatal(err)
		}
		want[name] = true
	}
	got := map[string]bool{}
	if err := s.List(ctx, "list/", func(name string) error { got[name] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("List found %v, want %v", got, want)
	}
	owners := map[int64]bool{} // by primary, as the slots were split
	for name := range want {
		slot, err := cc.ClusterKeySlot(ctx, s.Key(name)).Result()
		if err != nil {
			t.Fatal(err)
		}
		owners[slot*int64(len(nodes))/slots] = true
	}
	if len(owners) < 2 {
		t.Errorf("the leases all fell on one primary: List across primaries is untested")
	}
}
