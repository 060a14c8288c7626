package s3lease_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/tenure-go/tenure/internal/recordjson"
	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/leasetest"
	"github.com/tenure-go/tenure/lease/s3lease"
)

// Tests in this file talk to the S3-compatible servers that
// scripts/testservers.sh starts; their names start with TestIntegration (and
// BenchmarkIntegration) so that `make integration` selects them. Without the
// servers they are skipped, or failed when testservers.Required.

// server is one S3 server with a fresh bucket on it.
type server struct {
	testservers.S3Server
	client *s3.Client
	bucket string
}

// eachServer runs f in a subtest named after each configured server, with a
// bucket of its own.
func eachServer(t *testing.T, f func(t *testing.T, srv server)) {
	t.Helper()
	for _, s := range testservers.S3Servers(t) {
		t.Run(s.Name, func(t *testing.T) {
			c := s.Client()
			f(t, server{S3Server: s, client: c, bucket: testservers.NewBucket(t, c)})
		})
	}
}

// newStore returns a Store on the server's bucket, under a prefix so that the
// prefix path is exercised too.
func (srv server) newStore(t testing.TB) *s3lease.Store {
	t.Helper()
	s, err := s3lease.New(srv.client, s3lease.Config{Bucket: srv.bucket, Prefix: "tenure/leases/"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestIntegrationConformance(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		var store lease.Store = srv.newStore(t)
		if srv.Name == "minio" {
			store = leasetest.UnconditionalDelete(store) // see Store.Delete
		}
		leasetest.Run(t, func(t *testing.T) lease.Store { return store })
	})
}

// conflictFirst wraps a real client and answers the first attempt of every
// distinct PutObject body with 409 ConditionalRequestConflict, without sending
// it, as S3 does when another conditional write to the key is in flight. (Both
// servers serialize conditional writes per key and answer a race with 412, so
// a 409 has to be injected.) Each Put sends a unique body, so every Put is
// answered 409 once and then reaches the server.
type conflictFirst struct {
	*s3.Client
	mu   sync.Mutex      // guards seen
	seen map[string]bool // bodies answered 409
	n    atomic.Int64    // 409s made up
}

func (c *conflictFirst) PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	body, err := io.ReadAll(in.Body)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	first := !c.seen[string(body)]
	c.seen[string(body)] = true
	c.mu.Unlock()
	if first {
		c.n.Add(1)
		return nil, &smithy.OperationError{ServiceID: "S3", OperationName: "PutObject", Err: &awshttp.ResponseError{
			ResponseError: &smithyhttp.ResponseError{
				Response: &smithyhttp.Response{Response: &http.Response{StatusCode: http.StatusConflict}},
				Err: &smithy.GenericAPIError{Code: "ConditionalRequestConflict",
					Message: "The conditional request cannot succeed due to a conflicting operation against this resource."},
			},
		}}
	}
	in2 := *in
	in2.Body = bytes.NewReader(body)
	return c.Client.PutObject(ctx, &in2, optFns...)
}

// TestIntegrationConformanceWith409 runs the conformance suite, racing writers
// included, with every Put answered 409 ConditionalRequestConflict once: the
// retry must keep every rule.
func TestIntegrationConformanceWith409(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		api := &conflictFirst{Client: srv.client, seen: map[string]bool{}}
		s, err := s3lease.New(api, s3lease.Config{Bucket: srv.bucket, Prefix: "tenure/", ConflictBackoff: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		var store lease.Store = s
		if srv.Name == "minio" {
			store = leasetest.UnconditionalDelete(store)
		}
		leasetest.Run(t, func(t *testing.T) lease.Store { return store })
		if api.n.Load() == 0 {
			t.Error("no 409 was injected")
		}
	})
}

// TestIntegration409GivesUp checks that a Put still answered 409 after every
// attempt fails with an error that is not a conflict, and changes nothing.
func TestIntegration409GivesUp(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		ctx := t.Context()
		plain := srv.newStore(t)
		api := &conflictFirst{Client: srv.client, seen: map[string]bool{}}
		store, err := s3lease.New(api, s3lease.Config{Bucket: srv.bucket, Prefix: "tenure/leases/", ConflictAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		name := testservers.UniqueName("gives-up")
		v, err := plain.Put(ctx, name, validRecord("a", 1), lease.NoVersion)
		if err != nil {
			t.Fatal(err)
		}
		_, err = store.Put(ctx, name, validRecord("b", 2), v)
		if err == nil || errors.Is(err, lease.ErrConflict) || !strings.Contains(err.Error(), "ConditionalRequestConflict") {
			t.Fatalf("Put answered 409 every time: %v; want a non-conflict error naming the 409", err)
		}
		if rec, gotV, err := plain.Get(ctx, name); err != nil || gotV != v || rec.Holder != "a" {
			t.Errorf("after the failed Put: Get = %+v, %q, %v; want holder a at %q", rec, gotV, err, v)
		}
	})
}

// validRecord returns a record that passes Validate.
func validRecord(holder string, token uint64) lease.Record {
	return lease.Record{
		Holder:    holder,
		Token:     token,
		Duration:  10 * time.Second,
		Nonce:     fmt.Sprintf("%s-%d", holder, token),
		WrittenAt: time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC),
		Payload:   []byte("addr=10.0.0.1:8080"),
	}
}

// badRecordCase writes body by hand where lease name is kept, then checks that
// Get reports a *lease.RecordError for the lease and field, that Put cannot
// take the lease over (with NoVersion or with the object's own ETag, which
// Get refused to hand out), and that the object is left as it was.
func badRecordCase(t *testing.T, body []byte, field, reasonPart string) {
	t.Helper()
	eachServer(t, func(t *testing.T, srv server) {
		ctx := t.Context()
		store := srv.newStore(t)
		name := testservers.UniqueName("bad") + "/lease"
		key := store.Key(name)
		if _, err := srv.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(srv.bucket), Key: aws.String(key), Body: bytes.NewReader(body),
		}); err != nil {
			t.Fatalf("raw PutObject: %v", err)
		}

		rec, v, err := store.Get(ctx, name)
		var re *lease.RecordError
		switch {
		case !errors.As(err, &re):
			t.Fatalf("Get = %+v, %q, %v; want a *lease.RecordError", rec, v, err)
		case !errors.Is(err, lease.ErrInvalidRecord):
			t.Errorf("Get error %v does not match lease.ErrInvalidRecord", err)
		}
		if re.Name != name || re.Field != field {
			t.Errorf("RecordError names field %q of lease %q, want field %q of %q (%v)", re.Field, re.Name, field, name, err)
		}
		if !strings.Contains(re.Reason, reasonPart) {
			t.Errorf("RecordError reason %q does not mention %q", re.Reason, reasonPart)
		}
		if v != lease.NoVersion || rec.Holder != "" {
			t.Errorf("Get returned %+v at %q along with the error; want zero values", rec, v)
		}

		// Never a silent takeover: creating over the object conflicts.
		if _, err := store.Put(ctx, name, validRecord("intruder", 1), lease.NoVersion); !errors.Is(err, lease.ErrConflict) {
			t.Errorf("Put(NoVersion) over a bad record: %v, want a conflict", err)
		}
		out, err := srv.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(srv.bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("raw GetObject: %v", err)
		}
		defer out.Body.Close()
		got, err := io.ReadAll(out.Body)
		if err != nil {
			t.Fatalf("raw GetObject body: %v", err)
		}
		if !bytes.Equal(got, body) {
			t.Errorf("object changed: now %d bytes %.60q..., was %d bytes %.60q...", len(got), got, len(body), body)
		}
	})
}

// goodBody is a valid lease object with one part replaced: old by new.
func goodBody(t *testing.T, old, new string) []byte {
	t.Helper()
	const good = `{"v":1,"holder":"h","token":7,"duration_ns":10000000000,"released":false,"nonce":"n-1","written_at":"2025-03-14T15:09:26.535897932Z","payload":"YWRkcg==","write_id":"00"}`
	if !strings.Contains(good, old) {
		t.Fatalf("test bug: %q not in the good body", old)
	}
	return []byte(strings.Replace(good, old, new, 1))
}

func TestIntegrationBadRecordNotJSON(t *testing.T) {
	badRecordCase(t, []byte("holder=h token=7\n"), "json", "not a JSON object")
}

func TestIntegrationBadRecordNotAnObject(t *testing.T) {
	badRecordCase(t, []byte(`["h",7]`), "json", "not a JSON object")
}

func TestIntegrationBadRecordTokenAsString(t *testing.T) {
	badRecordCase(t, goodBody(t, `"token":7`, `"token":"7"`), "token", `is "7", want an integer`)
}

func TestIntegrationBadRecordDurationAsString(t *testing.T) {
	badRecordCase(t, goodBody(t, `"duration_ns":10000000000`, `"duration_ns":"10s"`), "duration", `is "10s", want an integer`)
}

func TestIntegrationBadRecordNegativeDuration(t *testing.T) {
	badRecordCase(t, goodBody(t, `"duration_ns":10000000000`, `"duration_ns":-10000000000`), "duration", "negative")
}

func TestIntegrationBadRecordMissingToken(t *testing.T) {
	badRecordCase(t, goodBody(t, `"token":7,`, ``), "token", "missing")
}

func TestIntegrationBadRecordMissingHolder(t *testing.T) {
	badRecordCase(t, goodBody(t, `"holder":"h",`, ``), "holder", "missing")
}

func TestIntegrationBadRecordUnknownVersion(t *testing.T) {
	badRecordCase(t, goodBody(t, `"v":1`, `"v":2,"lease_group":"x"`), "v", "not supported")
}

func TestIntegrationBadRecordOversizedObject(t *testing.T) {
	// A valid record padded with whitespace past the cap: only the size is
	// wrong, and Get must say so without reading it all.
	body := goodBody(t, `"v":1`, `"v":1`+strings.Repeat(" ", recordjson.MaxSize))
	badRecordCase(t, body, "body", fmt.Sprintf("limit %d", recordjson.MaxSize))
}

func TestIntegrationBadRecordOversizedPayload(t *testing.T) {
	payload := make([]byte, lease.MaxPayloadLen+1)
	body := goodBody(t, `"payload":"YWRkcg=="`, fmt.Sprintf(`"payload":"%s"`, base64.StdEncoding.EncodeToString(payload)))
	badRecordCase(t, body, "payload", fmt.Sprintf("%d bytes, limit %d", len(payload), lease.MaxPayloadLen))
}

// TestIntegrationTakeoverAfterRepair checks the way out of a bad record: an
// operator who overwrites it with a valid one (as `aws s3 cp` would) makes the
// lease usable again, by version, never by a blind write from tenure.
func TestIntegrationTakeoverAfterRepair(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		ctx := t.Context()
		store := srv.newStore(t)
		name := testservers.UniqueName("repair")
		put := func(body []byte) {
			t.Helper()
			if _, err := srv.client.PutObject(ctx, &s3.PutObjectInput{
				Bucket: aws.String(srv.bucket), Key: aws.String(store.Key(name)), Body: bytes.NewReader(body),
			}); err != nil {
				t.Fatalf("raw PutObject: %v", err)
			}
		}
		put([]byte("garbage"))
		if _, _, err := store.Get(ctx, name); !errors.Is(err, lease.ErrInvalidRecord) {
			t.Fatalf("Get of garbage: %v", err)
		}
		put(goodBody(t, `"v":1`, `"v":1`))
		rec, v, err := store.Get(ctx, name)
		if err != nil {
			t.Fatalf("Get of a repaired record: %v", err)
		}
		if rec.Holder != "h" || rec.Token != 7 || rec.Duration != 10*time.Second {
			t.Fatalf("Get of a repaired record = %+v", rec)
		}
		if _, err := store.Put(ctx, name, validRecord("b", 8), v); err != nil {
			t.Fatalf("Put after repair: %v", err)
		}
	})
}

// TestIntegrationETagIsVersion pins what the version is: the ETag exactly as
// the server sends it, quotes included, the same from PutObject and GetObject.
func TestIntegrationETagIsVersion(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		ctx := t.Context()
		store := srv.newStore(t)
		name := testservers.UniqueName("etag")
		v, err := store.Put(ctx, name, validRecord("a", 1), lease.NoVersion)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(v), `"`) || !strings.HasSuffix(string(v), `"`) {
			t.Errorf("version %q is not a quoted ETag", v)
		}
		out, err := srv.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(srv.bucket), Key: aws.String(store.Key(name))})
		if err != nil {
			t.Fatal(err)
		}
		out.Body.Close()
		if got := aws.ToString(out.ETag); got != string(v) {
			t.Errorf("GetObject ETag %q, Put returned version %q", got, v)
		}
		// If-Match: * would match any object on MinIO; Put must never send it.
		if _, err := store.Put(ctx, name, validRecord("b", 2), lease.Version("*")); !errors.Is(err, lease.ErrConflict) {
			t.Errorf("Put with version \"*\": %v, want a conflict", err)
		}
		if rec, _, err := store.Get(ctx, name); err != nil || rec.Holder != "a" {
			t.Errorf("after Put with version \"*\": Get = %+v, %v; want holder a", rec, err)
		}
	})
}

func BenchmarkIntegrationRenew(b *testing.B) {
	for _, s := range testservers.S3Servers(b) {
		b.Run(s.Name, func(b *testing.B) {
			c := s.Client()
			bucket := testservers.NewBucket(b, c)
			ctx := context.Background()

			b.Run("tenure", func(b *testing.B) {
				store, err := s3lease.New(c, s3lease.Config{Bucket: bucket, Prefix: "bench/"})
				if err != nil {
					b.Fatal(err)
				}
				name := testservers.UniqueName("renew")
				rec := validRecord("leader", 1)
				v, err := store.Put(ctx, name, rec, lease.NoVersion)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if v, err = store.Put(ctx, name, rec, v); err != nil {
						b.Fatal(err)
					}
				}
			})

			b.Run("raw-sdk", func(b *testing.B) {
				// The same request by hand: one PutObject with If-Match and a
				// body of the same size, and nothing else.
				store, err := s3lease.New(c, s3lease.Config{Bucket: bucket})
				if err != nil {
					b.Fatal(err)
				}
				key := "bench/raw-" + testservers.UniqueName("renew")
				probe := testservers.UniqueName("probe")
				if _, err := store.Put(ctx, probe, validRecord("leader", 1), lease.NoVersion); err != nil {
					b.Fatal(err)
				}
				out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(store.Key(probe))})
				if err != nil {
					b.Fatal(err)
				}
				body, err := io.ReadAll(out.Body)
				out.Body.Close()
				if err != nil {
					b.Fatal(err)
				}
				put, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
				if err != nil {
					b.Fatal(err)
				}
				etag := put.ETag
				b.ReportAllocs()
				for b.Loop() {
					// The body does not change, so neither does the ETag.
					if _, err := c.PutObject(ctx, &s3.PutObjectInput{
						Bucket:        aws.String(bucket),
						Key:           aws.String(key),
						Body:          bytes.NewReader(body),
						ContentLength: aws.Int64(int64(len(body))),
						ContentType:   aws.String("application/json"),
						IfMatch:       etag,
					}); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
