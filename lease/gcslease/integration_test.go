package gcslease_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/api/option"
	"google.golang.org/api/storage/v1"

	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/gcslease"
	"github.com/tenure-go/tenure/lease/leasetest"
)

// Tests in this file talk to the fake-gcs-server that scripts/testservers.sh
// starts (TENURE_GCS_ENDPOINT).

func client(t testing.TB) *storage.Service {
	t.Helper()
	return service(t, testservers.GCS(t))
}

func service(t testing.TB, endpoint string) *storage.Service {
	t.Helper()
	c, err := storage.NewService(context.Background(), option.WithEndpoint(endpoint+"/storage/v1/"), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newBucket creates a bucket of its own for the test.
func newBucket(t testing.TB, c *storage.Service) string {
	t.Helper()
	name := testservers.UniqueName("tenure-test")
	ctx, cancel := context.WithTimeout(context.Background(), testservers.SetupTimeout)
	defer cancel()
	if _, err := c.Buckets.Insert("test-project", &storage.Bucket{Name: name}).Context(ctx).Do(); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	return name
}

func newStore(t testing.TB) *gcslease.Store {
	c := client(t)
	s, err := gcslease.New(c, gcslease.Config{Bucket: newBucket(t, c), Prefix: "tenure/leases/"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestIntegrationConformance(t *testing.T) {
	s := newStore(t)
	leasetest.Run(t, func(t *testing.T) lease.Store { return s })
}

// TestIntegrationRace: 64 writers race on one object for 50 rounds;
// exactly one wins each.
func TestIntegrationRace(t *testing.T) {
	leasetest.Race(t, newStore(t), 64, 50)
}

// TestIntegrationMissingBucket: a bucket that does not exist is permanent,
// and says so.
func TestIntegrationMissingBucket(t *testing.T) {
	s, err := gcslease.New(client(t), gcslease.Config{Bucket: "no-such-bucket-" + strings.ToLower(testservers.UniqueName("x"))})
	if err != nil {
		t.Fatal(err)
	}
	rec := lease.Record{Holder: "a", Token: 1, Duration: time.Second, Nonce: "n"}
	_, perr := s.Put(t.Context(), "x", rec, lease.NoVersion)
	if !errors.Is(perr, lease.ErrPermanent) || !strings.Contains(perr.Error(), "bucket does not exist") {
		t.Errorf("Put to a missing bucket: %v, want a permanent error saying so", perr)
	}
}

// TestIntegrationRefused: fake-gcs-server checks no credentials, so a
// proxy in front of it answers as GCS does to a bad token (401) and to
// missing rights (403); both are permanent and say what to do. A 503 is
// not permanent.
func TestIntegrationRefused(t *testing.T) {
	target, err := url.Parse(testservers.GCS(t))
	if err != nil {
		t.Fatal(err)
	}
	var answer atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code := int(answer.Load()); code != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"error":{"code":%d,"message":"refused by the test's proxy"}}`, code)
			return
		}
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
	}))
	defer proxy.Close()
	c := service(t, proxy.URL)
	s, err := gcslease.New(c, gcslease.Config{Bucket: newBucket(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	rec := lease.Record{Holder: "a", Token: 1, Duration: time.Second, Nonce: "n"}
	for _, tc := range []struct {
		code      int
		permanent bool
		want      string
	}{
		{http.StatusUnauthorized, true, "check the credentials"},
		{http.StatusForbidden, true, "roles/storage.objectUser"},
		{http.StatusServiceUnavailable, false, "503"},
	} {
		answer.Store(int32(tc.code))
		_, _, gerr := s.Get(t.Context(), "x")
		_, perr := s.Put(t.Context(), "x", rec, lease.NoVersion)
		for _, err := range []error{gerr, perr} {
			if errors.Is(err, lease.ErrPermanent) != tc.permanent || !strings.Contains(fmt.Sprint(err), tc.want) {
				t.Errorf("answered %d: %v; want permanent %v, saying %q", tc.code, err, tc.permanent, tc.want)
			}
		}
	}
}
