package gcsfence_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/fencing/gcsfence"
	"github.com/tenure-go/tenure/internal/testservers"
)

// Tests in this file talk to the fake-gcs-server that scripts/testservers.sh
// starts (TENURE_GCS_ENDPOINT).

func setup(t *testing.T) (*gcsfence.Client, *storage.Client, string) {
	t.Helper()
	c, err := storage.NewClient(context.Background(), option.WithEndpoint(testservers.GCS(t)+"/storage/v1/"), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	bucket := testservers.UniqueName("tenure-fence")
	if err := c.Bucket(bucket).Create(t.Context(), "test", nil); err != nil {
		t.Fatal(err)
	}
	fc, err := gcsfence.New(c, gcsfence.Config{Attempts: 100})
	if err != nil {
		t.Fatal(err)
	}
	return fc, c, bucket
}

func under(lease string, tok fencing.Token) context.Context {
	return fencing.NewContext(context.Background(), fencing.Fence{Lease: lease, Token: tok})
}

func read(t *testing.T, c *storage.Client, bucket, object string) (string, fencing.Fence, map[string]string) {
	t.Helper()
	r, err := c.Bucket(bucket).Object(object).NewReader(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, _ := io.ReadAll(r)
	a, err := c.Bucket(bucket).Object(object).Attrs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	f, err := gcsfence.FenceOf(a.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), f, a.Metadata
}

func TestIntegrationPut(t *testing.T) {
	fc, c, bucket := setup(t)
	attrs := storage.ObjectAttrs{ContentType: "text/plain", Metadata: map[string]string{"mine": "kept"}}
	if _, err := fc.Put(under("a", 1), bucket, "k", []byte("one"), attrs); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.Put(under("a", 2), bucket, "k", []byte("two"), attrs); err != nil {
		t.Fatal(err)
	}
	var se *fencing.StaleTokenError
	if _, err := fc.Put(under("a", 1), bucket, "k", []byte("zombie"), attrs); !errors.As(err, &se) || se.Current != 2 {
		t.Errorf("a lower token: %v, want a stale token error naming 2", err)
	}
	if _, err := fc.Put(under("b", 9), bucket, "k", []byte("other"), attrs); !errors.Is(err, fencing.ErrWrongLease) {
		t.Errorf("another lease: %v, want fencing.ErrWrongLease", err)
	}
	if _, err := fc.Put(context.Background(), bucket, "k", []byte("x"), attrs); !errors.Is(err, fencing.ErrNoFence) {
		t.Errorf("no fence: %v, want fencing.ErrNoFence", err)
	}
	body, f, meta := read(t, c, bucket, "k")
	if body != "two" || f.Token != 2 || meta["mine"] != "kept" {
		t.Errorf("stored %q under %v with %v, want two under token 2, the caller's metadata kept", body, f, meta)
	}
}

// TestIntegrationSameBytes: a newer term writes the very bytes a stale
// writer saw, between that writer's check and its upload. A generation is
// never reused, so the stale upload's precondition fails and the fence,
// read again, refuses it: exact, where s3fence is not (its
// TestIntegrationSameBytesLimit).
func TestIntegrationSameBytes(t *testing.T) {
	fc, c, bucket := setup(t)
	if _, err := fc.Put(under("a", 1), bucket, "k", []byte("same"), storage.ObjectAttrs{}); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	gcsfence.SetAfterCheck(func() {
		once.Do(func() {
			gcsfence.SetAfterCheck(nil)
			if _, err := fc.Put(under("a", 2), bucket, "k", []byte("same"), storage.ObjectAttrs{}); err != nil {
				t.Errorf("the newer write: %v", err)
			}
		})
	})
	defer gcsfence.SetAfterCheck(nil)
	_, err := fc.Put(under("a", 1), bucket, "k", []byte("same"), storage.ObjectAttrs{})
	if !errors.Is(err, fencing.ErrStaleToken) {
		t.Errorf("the stale write: %v, want it refused", err)
	}
	if _, f, _ := read(t, c, bucket, "k"); f.Token != 2 {
		t.Errorf("stored under %v, want token 2", f)
	}
}

// TestIntegrationRacingWriters: writers of many terms race on one object;
// an observer never sees the token go back, the object ends with the
// highest token, and every refusal names a higher token.
func TestIntegrationRacingWriters(t *testing.T) {
	fc, c, bucket := setup(t)
	const writers, rounds = 8, 5
	ctx, stop := context.WithCancel(context.Background())
	var observed []fencing.Token
	var observer sync.WaitGroup
	observer.Go(func() {
		for ctx.Err() == nil {
			a, err := c.Bucket(bucket).Object("race").Attrs(ctx)
			if err != nil {
				continue // absent at first
			}
			f, err := gcsfence.FenceOf(a.Metadata)
			if err != nil {
				t.Errorf("observer: %v", err)
				return
			}
			observed = append(observed, f.Token)
		}
	})
	var wg sync.WaitGroup
	var accepted, refused atomic.Int32
	for w := range writers {
		wg.Go(func() {
			for r := range rounds {
				tok := fencing.Token(r*2 + w%4 + 1)
				_, err := fc.Put(under("a", tok), bucket, "race", []byte(fmt.Sprint(tok)), storage.ObjectAttrs{}) // bodies repeat: no matter here
				var se *fencing.StaleTokenError
				switch {
				case err == nil:
					accepted.Add(1)
				case errors.As(err, &se):
					refused.Add(1)
					if se.Current <= tok {
						t.Errorf("token %d refused by %v", tok, se)
					}
				default:
					t.Errorf("writer %d token %d: %v", w, tok, err)
				}
			}
		})
	}
	wg.Wait()
	stop()
	observer.Wait()
	top := fencing.Token((rounds-1)*2 + 3 + 1)
	if body, f, _ := read(t, c, bucket, "race"); f.Token != top || body != top.String() {
		t.Errorf("final object %q under %v, want token %d", body, f, top)
	}
	for i := 1; i < len(observed); i++ {
		if observed[i] < observed[i-1] {
			t.Errorf("observer saw token %d after %d", observed[i], observed[i-1])
			break
		}
	}
	t.Logf("%d accepted, %d refused; observer read %d times", accepted.Load(), refused.Load(), len(observed))
}

func TestIntegrationTombstoneAndDelete(t *testing.T) {
	fc, c, bucket := setup(t)
	if _, err := fc.Put(under("a", 3), bucket, "k", []byte("x"), storage.ObjectAttrs{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.Tombstone(under("a", 3), bucket, "k"); err != nil {
		t.Fatal(err)
	}
	body, f, meta := read(t, c, bucket, "k")
	if body != "" || f.Token != 3 || !gcsfence.IsTombstone(meta) {
		t.Errorf("tombstone: %q under %v, %v", body, f, meta)
	}
	if _, err := fc.Put(under("a", 2), bucket, "k", []byte("zombie"), storage.ObjectAttrs{}); !errors.Is(err, fencing.ErrStaleToken) {
		t.Errorf("a stale write over the tombstone: %v, want it refused", err)
	}
	if err := fc.Delete(under("a", 2), bucket, "k"); !errors.Is(err, fencing.ErrStaleToken) {
		t.Errorf("a stale delete: %v, want it refused", err)
	}
	if err := fc.Delete(under("a", 3), bucket, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Bucket(bucket).Object("k").Attrs(t.Context()); !errors.Is(err, storage.ErrObjectNotExist) {
		t.Errorf("after Delete: %v, want the object gone", err)
	}
}
