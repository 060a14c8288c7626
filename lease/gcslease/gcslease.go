// Package gcslease is a lease.Store on Google Cloud Storage, through
// Google's official client of the JSON API, google.golang.org/api/storage/v1:
// an object per lease, each write one upload with a generation
// precondition (the package example makes one).
//
// New takes the *storage.Service of that package; it calls
// Objects.Get(…).Download, Objects.Insert and, for operators' tools only,
// Objects.List and Objects.Delete. (cloud.google.com/go/storage, the
// higher-level client, brings gRPC's xDS and the OpenTelemetry exporters
// along: 25 MB of the tenure binary, for nothing tenure uses.)
//
// # The conditional primitive
//
// A lease is the object PREFIX+name; its body is tenure's JSON record (the
// format lease/s3lease documents), and its version is the object's
// generation, in decimal, which a read gets in the same response as the
// body (X-Goog-Generation). Every write is one single-request upload (a
// multipart upload, ChunkSize 0) with a precondition:
//
//   - to create a lease, ifGenerationMatch=0: only if no live object exists;
//   - to replace one, ifGenerationMatch=GENERATION.
//
// GCS checks the precondition and writes as one step: of any number of
// writers that read the same generation, one succeeds and the others get 412
// Precondition Failed, a conflict. A generation is never reused for an
// object name, even after a delete, so a version is never handed out twice.
//
// Releasing a lease is a conditional overwrite (a record with Released set),
// as on every store: the protocol never deletes. Delete, for tenure gc and
// tenure release --force, names the generation and sends ifGenerationMatch:
// GCS checks the precondition, and a server that ignores it on deletes
// (fake-gcs-server does) still deletes only that generation, which is
// live or gone. On a bucket with object versioning, use GCS itself:
// there a generation outlives its overwrite, and only the precondition
// keeps a delete from removing an archived one while reporting success.
//
// The service's calls are sent once: a write with a precondition retried
// after a lost response would fail its precondition against the first
// send, a false conflict, where the lease.Store contract wants an error
// that makes the caller read back and compare its nonce. (The service
// retries nothing unless asked: this package never asks.)
//
// # Linearizability
//
// GCS is strongly consistent for these operations: "When you upload an
// object, the object is immediately available for download and metadata
// operations… read-after-write, read-after-metadata-update and
// read-after-delete" ("Consistency", cloud.google.com/storage/docs/
// consistency). A Get that starts after a Put returned sees it. Do not put
// a cache (Cloud CDN, a caching proxy) in front of the bucket.
//
// # Permissions
//
// A candidate needs storage.objects.get and storage.objects.create on the
// bucket, and storage.objects.delete because an overwrite replaces an
// object (roles/storage.objectUser has all three). tenure list needs
// storage.objects.list; tenure gc needs delete.
//
// # Errors
//
// A missing bucket (404 on an upload, or on a read of a bucket that does not
// exist), denied access (403), failed credentials (401) and a bad request
// (400) are wrapped with lease.Permanent, so that tenure fails at once (the
// tenure command exits 69). Timeouts, 429 and 5xx are transient.
package gcslease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/api/googleapi"
	"google.golang.org/api/storage/v1"

	"github.com/tenure-go/tenure/internal/recordjson"
	"github.com/tenure-go/tenure/lease"
)

// Config configures a Store. Bucket is required.
type Config struct {
	// Bucket holds the lease objects.
	Bucket string
	// Prefix is put in front of every lease name to make its object name,
	// for example "tenure/". Default "".
	Prefix string
}

// Store is a lease.Store on a GCS bucket. It is safe for concurrent use.
// Make one with New.
type Store struct {
	objects *storage.ObjectsService
	bucket  string
	prefix  string
}

var (
	_ lease.Store   = (*Store)(nil)
	_ lease.Lister  = (*Store)(nil)
	_ lease.Deleter = (*Store)(nil)
)

// maxObjectName is the longest object name GCS takes, in bytes.
const maxObjectName = 1024

// New returns a Store on the bucket cfg names, through svc. It sends
// nothing: a missing bucket shows at the first write, as a permanent
// error.
func New(svc *storage.Service, cfg Config) (*Store, error) {
	if svc == nil || svc.Objects == nil {
		return nil, errors.New("gcslease: nil service: pass a *storage.Service of google.golang.org/api/storage/v1 (storage.NewService)")
	}
	switch {
	case cfg.Bucket == "":
		return nil, errors.New("gcslease: Config.Bucket is empty")
	case strings.HasPrefix(cfg.Bucket, "gs://") || strings.Contains(cfg.Bucket, "/"):
		return nil, fmt.Errorf("gcslease: Config.Bucket %q: want the bare bucket name; put the object prefix in Config.Prefix", cfg.Bucket)
	case len(cfg.Prefix)+lease.MaxNameLen > maxObjectName:
		return nil, fmt.Errorf("gcslease: Config.Prefix is %d bytes, limit %d", len(cfg.Prefix), maxObjectName-lease.MaxNameLen)
	}
	return &Store{objects: svc.Objects, bucket: cfg.Bucket, prefix: cfg.Prefix}, nil
}

// Object returns the object name of the lease name.
func (s *Store) Object(name string) string { return s.prefix + name }

// Get implements lease.Store with one download of the object, whose
// generation comes in the same response (X-Goog-Generation).
func (s *Store) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	if err := lease.CheckGet(ctx, name); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	res, err := s.objects.Get(s.bucket, s.Object(name)).Context(ctx).Download()
	if err != nil {
		if status(err) == http.StatusNotFound && !bucketMissing(err) {
			return lease.Record{}, lease.NoVersion, lease.NotFound(name)
		}
		return lease.Record{}, lease.NoVersion, s.failed(ctx, "get", name, err)
	}
	defer res.Body.Close()
	if res.ContentLength > recordjson.MaxSize {
		return lease.Record{}, lease.NoVersion, &lease.RecordError{Name: name, Field: "body",
			Reason: fmt.Sprintf("object is %d bytes, limit %d: not a lease record (not read)", res.ContentLength, recordjson.MaxSize)}
	}
	gen, err := strconv.ParseInt(res.Header.Get("X-Goog-Generation"), 10, 64)
	if err != nil || gen <= 0 {
		return lease.Record{}, lease.NoVersion, s.failed(ctx, "get", name, fmt.Errorf("the download named no generation (X-Goog-Generation %q)", res.Header.Get("X-Goog-Generation")))
	}
	data, err := io.ReadAll(io.LimitReader(res.Body, recordjson.MaxSize+1))
	if err != nil {
		return lease.Record{}, lease.NoVersion, s.failed(ctx, "get", name, err)
	}
	if len(data) > recordjson.MaxSize {
		return lease.Record{}, lease.NoVersion, &lease.RecordError{Name: name, Field: "body",
			Reason: fmt.Sprintf("object is over %d bytes: not a lease record", recordjson.MaxSize)}
	}
	rec, err := recordjson.Decode(name, data)
	if err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	return rec, version(gen), nil
}

func version(gen int64) lease.Version { return lease.Version(strconv.FormatInt(gen, 10)) }

// Put implements lease.Store with one upload under ifGenerationMatch.
func (s *Store) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	if err := lease.CheckPut(ctx, name, rec); err != nil {
		return lease.NoVersion, err
	}
	var gen int64 // 0: only if no live object exists
	if expect != lease.NoVersion {
		g, err := strconv.ParseInt(string(expect), 10, 64)
		if err != nil || g <= 0 {
			return lease.NoVersion, lease.Conflict(name) // no generation this store handed out
		}
		gen = g
	}
	obj := &storage.Object{Name: s.Object(name), ContentType: "application/json", CacheControl: "no-store"}
	body := recordjson.Encode(rec, "")
	// One request (a multipart upload), never resumed, never retried.
	got, err := s.objects.Insert(s.bucket, obj).IfGenerationMatch(gen).
		Media(bytes.NewReader(body), googleapi.ContentType("application/json"), googleapi.ChunkSize(0)).Context(ctx).Do()
	if err != nil {
		if status(err) == http.StatusPreconditionFailed {
			return lease.NoVersion, lease.Conflict(name)
		}
		return lease.NoVersion, s.failed(ctx, "put", name, err)
	}
	return version(got.Generation), nil
}

// status returns the HTTP status of a GCS error, or 0.
func status(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}

// bucketMissing reports whether a 404 is the bucket's, not the object's.
func bucketMissing(err error) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && ge.Code == http.StatusNotFound && strings.Contains(strings.ToLower(ge.Message), "bucket")
}

// failed wraps a failed call's error: the context's error when ctx ended,
// and permanent when retrying cannot cure it.
func (s *Store) failed(ctx context.Context, op, name string, err error) error {
	err = lease.CallError(ctx, err)
	e := fmt.Errorf("%s lease %q (gs://%s/%s): %w", op, name, s.bucket, s.Object(name), err)
	switch code := status(err); {
	case code == http.StatusNotFound:
		return lease.Permanent(fmt.Errorf("%w; the bucket does not exist: create it (gcloud storage buckets create gs://%s)", e, s.bucket))
	case code == http.StatusForbidden:
		return lease.Permanent(fmt.Errorf("%w; grant storage.objects.get, create and delete on the bucket (roles/storage.objectUser)", e))
	case code == http.StatusUnauthorized:
		return lease.Permanent(fmt.Errorf("%w; check the credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud auth application-default login)", e))
	case code == http.StatusBadRequest:
		return lease.Permanent(e)
	}
	return e
}

// List implements lease.Lister with object listings under the prefix.
func (s *Store) List(ctx context.Context, prefix string, fn func(name string) error) error {
	call := s.objects.List(s.bucket).Prefix(s.Object(prefix)).Projection("noAcl").Fields("items/name", "nextPageToken")
	err := call.Pages(ctx, func(page *storage.Objects) error {
		for _, o := range page.Items {
			name, ok := strings.CutPrefix(o.Name, s.prefix)
			if !ok || lease.ValidateName(name) != nil {
				continue // not a lease's object
			}
			if err := fn(name); err != nil {
				return err
			}
		}
		return nil
	})
	var ge *googleapi.Error
	if err != nil && errors.As(err, &ge) {
		return s.failed(ctx, "list", prefix+"*", err)
	}
	return err
}

// Delete implements lease.Deleter with one delete under ifGenerationMatch
// (none with lease.AnyVersion).
func (s *Store) Delete(ctx context.Context, name string, expect lease.Version) error {
	if err := lease.CheckDelete(ctx, name); err != nil {
		return err
	}
	call := s.objects.Delete(s.bucket, s.Object(name))
	if expect != lease.AnyVersion {
		gen, err := strconv.ParseInt(string(expect), 10, 64)
		if err != nil || gen <= 0 {
			return lease.Conflict(name)
		}
		// The precondition is GCS's check; naming the generation too makes
		// the delete exact where a server ignores the precondition
		// (fake-gcs-server): deleting a generation that is no longer live
		// finds nothing.
		call = call.Generation(gen).IfGenerationMatch(gen)
	}
	err := call.Context(ctx).Do()
	switch code := status(err); {
	case err == nil:
		return nil
	case code == http.StatusNotFound && bucketMissing(err):
	case code == http.StatusNotFound && expect != lease.AnyVersion:
		return lease.Conflict(name) // gone, or not that generation
	case code == http.StatusNotFound:
		return lease.NotFound(name)
	case code == http.StatusPreconditionFailed:
		return lease.Conflict(name)
	}
	return s.failed(ctx, "delete", name, err)
}
