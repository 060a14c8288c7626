package etcdlease_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/internal/testservers/servers"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/etcdlease"
	"github.com/tenure-go/tenure/lease/leasetest"
)

// Tests in this file talk to the etcd server that scripts/testservers.sh
// starts (TENURE_ETCD_ENDPOINT).

func client(t testing.TB, cfg clientv3.Config) *clientv3.Client {
	t.Helper()
	cfg.Endpoints = []string{testservers.Etcd(t)}
	cfg.DialTimeout = 5 * time.Second
	cfg.Logger = zap.NewNop()
	c, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newStore(t testing.TB) (*etcdlease.Store, *clientv3.Client) {
	c := client(t, clientv3.Config{})
	s, err := etcdlease.New(c, etcdlease.Config{Prefix: "/" + testservers.UniqueName("tenure") + "/"})
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func TestIntegrationConformance(t *testing.T) {
	s, _ := newStore(t)
	leasetest.Run(t, func(t *testing.T) lease.Store { return s })
}

// TestIntegrationRace: 64 writers, each with a client (a connection) of
// its own, race on one key for 50 rounds; exactly one wins each.
func TestIntegrationRace(t *testing.T) {
	prefix := "/" + testservers.UniqueName("race") + "/"
	var stores []lease.Store
	for range 64 {
		s, err := etcdlease.New(client(t, clientv3.Config{}), etcdlease.Config{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	leasetest.RaceEach(t, stores, 50)
}

// TestIntegrationConflictCarriesRecord: a failed Txn's else branch brings
// the stored record, at no second request.
func TestIntegrationConflictCarriesRecord(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	rec := lease.Record{Holder: "a", Token: 3, Duration: time.Second, Nonce: "n"}
	v, err := s.Put(ctx, "x", rec, lease.NoVersion)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Put(ctx, "x", lease.Record{Holder: "b", Token: 4, Duration: time.Second, Nonce: "m"}, lease.NoVersion)
	var ce *lease.ConflictError
	if !errors.As(err, &ce) || !ce.Found || ce.Version != v || !ce.Current.Equal(rec) {
		t.Errorf("conflict: %#v, want one carrying %q at %q", err, rec.Holder, v)
	}
}

// TestIntegrationPermanentErrors: on the server with authentication on, a
// user without rights on the prefix, and a wrong password, are permanent.
func TestIntegrationPermanentErrors(t *testing.T) {
	ctx := t.Context()
	rec := lease.Record{Holder: "a", Token: 1, Duration: time.Second, Nonce: "n"}
	dial := func(password string) (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{Endpoints: []string{testservers.EtcdAuth(t)}, Username: "tenure", Password: password,
			DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	}
	noRights, err := dial(servers.EtcdTenurePassword)
	if err != nil {
		t.Fatal(err)
	}
	defer noRights.Close()
	s, _ := etcdlease.New(noRights, etcdlease.Config{Prefix: "/tenure/"})
	_, _, gerr := s.Get(ctx, "x")
	_, perr := s.Put(ctx, "x", rec, lease.NoVersion)
	for _, err := range []error{gerr, perr} {
		if !errors.Is(err, lease.ErrPermanent) || !strings.Contains(err.Error(), "grant-permission") {
			t.Errorf("without rights: %v, want a permanent error saying what to grant", err)
		}
	}
	// clientv3.New logs in, so a wrong password fails there; storeurl makes
	// the client at the first call, where the store classifies the error
	// (lease/storeurl's TestIntegrationEtcdLogin).
	if _, err := dial("wrong"); !errors.Is(err, rpctypes.ErrAuthFailed) {
		t.Errorf("wrong password: %v, want %v", err, rpctypes.ErrAuthFailed)
	}
}
