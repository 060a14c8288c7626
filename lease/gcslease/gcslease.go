// Package gcslease is a lease.Store on Google Cloud Storage, through the
// official client, cloud.google.com/go/storage: an object per lease, each
// write one upload with a generation precondition.
//
//	client, err := storage.NewClient(ctx) // Application Default Credentials
//	store, err := gcslease.New(client, gcslease.Config{Bucket: "acme-leases", Prefix: "tenure/"})
//
// The GCS client is a tree of handles, not an interface, so New takes the
// *storage.Client itself; it calls Object(…).NewReader, NewWriter and, for
// operators' tools only, Objects and Delete.
//
// # The conditional primitive
//
// A lease is the object PREFIX+name; its body is tenure's JSON record (the
// format lease/s3lease documents), and its version is the object's
// generation, in decimal. Every write is one single-request upload
// (ChunkSize 0) with a precondition:
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
// The client's own retries are off for writes: it counts a write with a
// precondition as idempotent and would send it again after a lost response,
// and the second send would fail its precondition against the first: a false
// conflict, where the lease.Store contract wants an error that makes the
// caller read back and compare its nonce.
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
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"

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
	bucket *storage.BucketHandle
	name   string
	prefix string
}

var (
	_ lease.Store   = (*Store)(nil)
	_ lease.Lister  = (*Store)(nil)
	_ lease.Deleter = (*Store)(nil)
)

// maxObjectName is the longest object name GCS takes, in bytes.
const maxObjectName = 1024

// New returns a Store on the bucket cfg names, through client. It sends
// nothing: a missing bucket shows at the first call, as a permanent error.
func New(client *storage.Client, cfg Config) (*Store, error) {
	if client == nil {
		return nil, errors.New("gcslease: nil client: pass a *storage.Client")
	}
	switch {
	case cfg.Bucket == "":
		return nil, errors.New("gcslease: Config.Bucket is empty")
	case strings.HasPrefix(cfg.Bucket, "gs://") || strings.Contains(cfg.Bucket, "/"):
		return nil, fmt.Errorf("gcslease: Config.Bucket %q: want the bare bucket name; put the object prefix in Config.Prefix", cfg.Bucket)
	case len(cfg.Prefix)+lease.MaxNameLen > maxObjectName:
		return nil, fmt.Errorf("gcslease: Config.Prefix is %d bytes, limit %d", len(cfg.Prefix), maxObjectName-lease.MaxNameLen)
	}
	return &Store{bucket: client.Bucket(cfg.Bucket), name: cfg.Bucket, prefix: cfg.Prefix}, nil
}

// Object returns the object name of the lease name.
func (s *Store) Object(name string) string { return s.prefix + name }

// Get implements lease.Store with one object read.
func (s *Store) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	if err := lease.CheckGet(ctx, name); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	r, err := s.bucket.Object(s.Object(name)).ReadCompressed(true).NewReader(ctx)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return lease.Record{}, lease.NoVersion, lease.NotFound(name)
	}
	if err != nil {
		return lease.Record{}, lease.NoVersion, s.failed(ctx, "get", name, err)
	}
	defer r.Close()
	if r.Attrs.Size > recordjson.MaxSize {
		return lease.Record{}, lease.NoVersion, &lease.RecordError{Name: name, Field: "body",
			Reason: fmt.Sprintf("object is %d bytes, limit %d: not a lease record (not read)", r.Attrs.Size, recordjson.MaxSize)}
	}
	data, err := io.ReadAll(io.LimitReader(r, recordjson.MaxSize+1))
	if err != nil {
		return lease.Record{}, lease.NoVersion, s.failed(ctx, "get", name, err)
	}
	rec, err := recordjson.Decode(name, data)
	if err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	return rec, version(r.Attrs.Generation), nil
}

func version(gen int64) lease.Version { return lease.Version(strconv.FormatInt(gen, 10)) }

// Put implements lease.Store with one upload under ifGenerationMatch.
func (s *Store) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	if err := lease.CheckPut(ctx, name, rec); err != nil {
		return lease.NoVersion, err
	}
	cond := storage.Conditions{DoesNotExist: true}
	if expect != lease.NoVersion {
		gen, err := strconv.ParseInt(string(expect), 10, 64)
		if err != nil || gen <= 0 {
			return lease.NoVersion, lease.Conflict(name) // no generation this store handed out
		}
		cond = storage.Conditions{GenerationMatch: gen}
	}
	// The writer's context is the call's: cancelling it abandons the upload.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := s.bucket.Object(s.Object(name)).If(cond).Retryer(storage.WithPolicy(storage.RetryNever)).NewWriter(wctx)
	w.ChunkSize = 0 // one request
	w.ContentType = "application/json"
	w.CacheControl = "no-store"
	if _, err := w.Write(recordjson.Encode(rec, "")); err != nil {
		cancel()
		_ = w.Close()
		return lease.NoVersion, s.failed(ctx, "put", name, err)
	}
	if err := w.Close(); err != nil {
		if status(err) == http.StatusPreconditionFailed {
			return lease.NoVersion, lease.Conflict(name)
		}
		return lease.NoVersion, s.failed(ctx, "put", name, err)
	}
	return version(w.Attrs().Generation), nil
}

// status returns the HTTP status of a GCS error, or 0.
func status(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}

// failed wraps a failed call's error: the context's error when ctx ended,
// and permanent when retrying cannot cure it.
func (s *Store) failed(ctx context.Context, op, name string, err error) error {
	err = lease.CallError(ctx, err)
	e := fmt.Errorf("%s lease %q (gs://%s/%s): %w", op, name, s.name, s.Object(name), err)
	switch code := status(err); {
	case errors.Is(err, storage.ErrBucketNotExist), code == http.StatusNotFound:
		return lease.Permanent(fmt.Errorf("%w; the bucket does not exist: create it (gcloud storage buckets create gs://%s)", e, s.name))
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
	it := s.bucket.Objects(ctx, &storage.Query{Prefix: s.Object(prefix), Projection: storage.ProjectionNoACL})
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return nil
		}
		if err != nil {
			return s.failed(ctx, "list", prefix+"*", err)
		}
		name, ok := strings.CutPrefix(a.Name, s.prefix)
		if !ok || lease.ValidateName(name) != nil {
			continue // not a lease's object
		}
		if err := fn(name); err != nil {
			return err
		}
	}
}

// Delete implements lease.Deleter with one delete under ifGenerationMatch
// (none with lease.AnyVersion).
func (s *Store) Delete(ctx context.Context, name string, expect lease.Version) error {
	if err := lease.CheckDelete(ctx, name); err != nil {
		return err
	}
	o := s.bucket.Object(s.Object(name)).Retryer(storage.WithPolicy(storage.RetryNever))
	if expect != lease.AnyVersion {
		gen, err := strconv.ParseInt(string(expect), 10, 64)
		if err != nil || gen <= 0 {
			return lease.Conflict(name)
		}
		// The precondition is GCS's check; naming the generation too makes
		// the delete exact where a server ignores the precondition
		// (fake-gcs-server): deleting a generation that is no longer live
		// finds nothing.
		o = o.Generation(gen).If(storage.Conditions{GenerationMatch: gen})
	}
	err := o.Delete(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, storage.ErrObjectNotExist) && expect != lease.AnyVersion:
		return lease.Conflict(name) // gone, or not that generation
	case errors.Is(err, storage.ErrObjectNotExist):
		return lease.NotFound(name)
	case status(err) == http.StatusPreconditionFailed:
		return lease.Conflict(name)
	}
	return s.failed(ctx, "delete", name, err)
}
