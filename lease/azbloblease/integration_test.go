package azbloblease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/azbloblease"
	"github.com/tenure-go/tenure/lease/leasetest"
)

// Tests in this file talk to the Azurite blob service that
// scripts/testservers.sh starts (TENURE_AZURITE_ENDPOINT).

func containerClient(t testing.TB, srv testservers.AzuriteServer, key, name string) *container.Client {
	t.Helper()
	cred, err := container.NewSharedKeyCredential(srv.Account, key)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := container.NewClientWithSharedKeyCredential(srv.Endpoint+"/"+name, cred,
		&container.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

// newContainer creates a container of its own for the test.
func newContainer(t testing.TB) (*container.Client, testservers.AzuriteServer, string) {
	t.Helper()
	srv := testservers.Azurite(t)
	name := testservers.UniqueName("tenure-test")
	cc := containerClient(t, srv, srv.Key, name)
	ctx, cancel := context.WithTimeout(context.Background(), testservers.SetupTimeout)
	defer cancel()
	if _, err := cc.Create(ctx, nil); err != nil {
		t.Fatalf("create container %s: %v", name, err)
	}
	return cc, srv, name
}

func newStore(t testing.TB) *azbloblease.Store {
	cc, _, _ := newContainer(t)
	s, err := azbloblease.New(cc, azbloblease.Config{Prefix: "tenure/leases/"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestIntegrationConformance(t *testing.T) {
	s := newStore(t)
	leasetest.Run(t, func(t *testing.T) lease.Store { return s })
}

// TestIntegrationRace: 64 writers race on one blob for 50 rounds; exactly
// one wins each.
func TestIntegrationRace(t *testing.T) {
	leasetest.Race(t, newStore(t), 64, 50)
}

// TestIntegrationPermanentErrors: a missing container and a wrong key are
// permanent, and say what to do.
func TestIntegrationPermanentErrors(t *testing.T) {
	_, srv, name := newContainer(t)
	rec := lease.Record{Holder: "a", Token: 1, Duration: time.Second, Nonce: "n"}
	wrongKey := "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktd3Jvbmcta2V5LXdyb25nLWtleQ=="
	for _, c := range []struct {
		what string
		cc   *container.Client
		want string
	}{
		{"missing container", containerClient(t, srv, srv.Key, "no-such-container"), "container does not exist"},
		{"wrong key", containerClient(t, srv, wrongKey, name), "check the credentials"},
	} {
		s, err := azbloblease.New(c.cc, azbloblease.Config{})
		if err != nil {
			t.Fatal(err)
		}
		_, _, gerr := s.Get(t.Context(), "x")
		_, perr := s.Put(t.Context(), "x", rec, lease.NoVersion)
		for _, err := range []error{gerr, perr} {
			if !errors.Is(err, lease.ErrPermanent) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v; want a permanent error saying %q", c.what, err, c.want)
			}
		}
	}
}
