// Package gcsfence fences writes to the caller's own Cloud Storage objects:
// a write succeeds only if the object was last written under a fence that
// admits the writer's, and the object then carries the writer's fence in
// its metadata.
//
//	fc, err := gcsfence.New(client, gcsfence.Config{}) // client: a *storage.Client
//	// in OnElected(ctx, term), or below it with ctx passed down:
//	_, err = fc.Put(ctx, "reports", "daily.json", body, storage.ObjectAttrs{ContentType: "application/json"})
//	if errors.Is(err, fencing.ErrStaleToken) { /* this term is over: stop writing */ }
//
// # How, and why it is exact
//
// GCS cannot compare a number in a precondition, so each write is a read, a
// check and a conditional write, as in fencing/s3fence:
//
//  1. Attrs: the object's generation and its fence, from the metadata keys
//     fencing-token and fencing-lease.
//  2. Check: an object without a fence, or with one of the same lease and a
//     token no higher, admits the write; otherwise the write fails with a
//     *fencing.StaleTokenError or *fencing.WrongLeaseError and sends nothing.
//  3. An upload with the fence in the metadata and ifGenerationMatch: the
//     generation read (0 if there was no object). If another writer changed
//     the object since step 1, GCS answers 412 and the write starts again at
//     step 1, at most Config.Attempts times.
//
// Unlike an S3 ETag, a generation is never reused for an object name: every
// write and every re-creation gets a new one. So the precondition holds only
// over the very write whose fence was checked, and a lower token never
// overwrites an object written under a higher one, whatever the bodies hold.
// That is exact, where s3fence needs bodies that differ from write to write.
//
// # Deletes
//
// A deleted object takes its fence with it, and a stale writer could then
// create it again. Tombstone replaces the object with an empty one that
// keeps the fence and carries fencing-tombstone: true (IsTombstone); readers
// must treat it as absent. Delete removes an object whose fence admits the
// caller, under ifGenerationMatch: use it only once no older term can still
// write.
//
// # Assumptions
//
//  1. Every writer of the fenced objects goes through a Client, under one
//     lease; objects written otherwise have no fence and admit anyone.
//  2. The bucket has no object versioning, or only GCS itself serves it
//     (see lease/gcslease on deletes).
//
// # Cost
//
// One metadata read before every upload: a Class B and a Class A
// operation, and one more round of both each time another writer wins a
// race. Permissions: storage.objects.get, create and delete (an overwrite
// replaces an object).
package gcsfence

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/tenure-go/tenure/fencing"
)

// Metadata keys of the fence.
const (
	tokenMetadata     = "fencing-token"
	leaseMetadata     = "fencing-lease"
	tombstoneMetadata = "fencing-tombstone"
)

// defaultAttempts is the default Config.Attempts: a write reads and
// uploads at most 10 times before it gives up.
const defaultAttempts = 10

// Config configures a Client.
type Config struct {
	// Attempts is how many times a write reads the object and sends the
	// conditional upload before giving up, when other writers keep
	// changing the object between the two (412). Default 10;
	// 1 turns retries off.
	Attempts int
}

// Client writes fenced objects. It is safe for concurrent use.
type Client struct {
	c        *storage.Client
	attempts int
}

// New returns a Client that sends its requests through c. It makes no
// request.
func New(c *storage.Client, cfg Config) (*Client, error) {
	if c == nil {
		return nil, errors.New("gcsfence: nil *storage.Client")
	}
	switch {
	case cfg.Attempts < 0:
		return nil, fmt.Errorf("gcsfence: Config.Attempts is %d: want 0 (default %d) or more", cfg.Attempts, defaultAttempts)
	case cfg.Attempts == 0:
		cfg.Attempts = defaultAttempts
	}
	return &Client{c: c, attempts: cfg.Attempts}, nil
}

// Put writes body to gs://bucket/object under the fence ctx carries
// (fencing.FromContext): only if the stored object has no fence or one of
// the same lease with a token no higher. attrs gives the object's other
// attributes (ContentType, Metadata, CacheControl...); its Metadata must
// not use the fence's keys. It returns the written object's attributes.
//
// A refusal by the fence is an error matching fencing.ErrStaleToken (a
// *fencing.StaleTokenError naming the stored token) or
// fencing.ErrWrongLease, and nothing is written.
func (c *Client) Put(ctx context.Context, bucket, object string, body []byte, attrs storage.ObjectAttrs) (*storage.ObjectAttrs, error) {
	return c.write(ctx, "put", bucket, object, body, attrs, false)
}

// Tombstone replaces the object with an empty one whose metadata keeps the
// fence and marks it deleted (IsTombstone), under the same conditions as
// Put.
func (c *Client) Tombstone(ctx context.Context, bucket, object string) (*storage.ObjectAttrs, error) {
	return c.write(ctx, "tombstone", bucket, object, nil, storage.ObjectAttrs{}, true)
}

func (c *Client) write(ctx context.Context, op, bucket, object string, body []byte, attrs storage.ObjectAttrs, tombstone bool) (*storage.ObjectAttrs, error) {
	where := fmt.Sprintf("gs://%s/%s", bucket, object)
	f, err := fenceOf(ctx)
	if err != nil {
		return nil, fmt.Errorf("gcsfence: %s %s: %w", op, where, err)
	}
	meta := make(map[string]string, len(attrs.Metadata)+3)
	for k, v := range attrs.Metadata {
		if isFenceKey(k) {
			return nil, fmt.Errorf("gcsfence: %s %s: Metadata sets %q, a key the fence owns", op, where, k)
		}
		meta[k] = v
	}
	meta[tokenMetadata], meta[leaseMetadata] = f.Token.String(), f.Lease
	if tombstone {
		meta[tombstoneMetadata] = "true"
	}
	o := c.c.Bucket(bucket).Object(object).Retryer(storage.WithPolicy(storage.RetryNever))
	for attempt := 1; ; attempt++ {
		gen, err := c.check(ctx, o, f)
		if err != nil {
			return nil, fmt.Errorf("gcsfence: %s %s: %w", op, where, err)
		}
		cond := storage.Conditions{GenerationMatch: gen}
		if gen == 0 {
			cond = storage.Conditions{DoesNotExist: true}
		}
		wctx, cancel := context.WithCancel(ctx)
		w := o.If(cond).NewWriter(wctx)
		w.ObjectAttrs = attrs
		w.Name, w.Bucket, w.Metadata = object, bucket, meta
		w.ChunkSize = 0 // one request
		_, werr := w.Write(body)
		if werr != nil {
			cancel()
		}
		cerr := w.Close()
		cancel()
		if werr == nil && cerr == nil {
			return w.Attrs(), nil
		}
		err = errors.Join(werr, cerr)
		if status(err) != http.StatusPreconditionFailed {
			return nil, fmt.Errorf("gcsfence: %s %s: %w", op, where, err)
		}
		if attempt >= c.attempts {
			return nil, fmt.Errorf("gcsfence: %s %s: gave up after %d attempts, each beaten by another writer (412); not written: %w", op, where, attempt, err)
		}
	}
}

// Delete deletes gs://bucket/object if its fence admits the one ctx
// carries, under ifGenerationMatch on the generation checked. A deleted
// object's fence is gone with it: prefer Tombstone while an older term may
// still write.
func (c *Client) Delete(ctx context.Context, bucket, object string) error {
	where := fmt.Sprintf("gs://%s/%s", bucket, object)
	f, err := fenceOf(ctx)
	if err != nil {
		return fmt.Errorf("gcsfence: delete %s: %w", where, err)
	}
	o := c.c.Bucket(bucket).Object(object).Retryer(storage.WithPolicy(storage.RetryNever))
	for attempt := 1; ; attempt++ {
		gen, err := c.check(ctx, o, f)
		if err != nil {
			return fmt.Errorf("gcsfence: delete %s: %w", where, err)
		}
		if gen == 0 {
			return nil // nothing to delete
		}
		err = o.Generation(gen).If(storage.Conditions{GenerationMatch: gen}).Delete(ctx)
		switch {
		case err == nil:
			return nil
		case status(err) != http.StatusPreconditionFailed && !errors.Is(err, storage.ErrObjectNotExist):
			return fmt.Errorf("gcsfence: delete %s: %w", where, err)
		case attempt >= c.attempts:
			return fmt.Errorf("gcsfence: delete %s: gave up after %d attempts, each beaten by another writer: %w", where, attempt, err)
		}
	}
}

// check reads the object's fence and generation (0 if there is none) and
// checks f against the fence.
func (c *Client) check(ctx context.Context, o *storage.ObjectHandle, f fencing.Fence) (int64, error) {
	a, err := o.Attrs(ctx)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the stored object's fence: %w", err)
	}
	cur, err := FenceOf(a.Metadata)
	if err != nil {
		return 0, fmt.Errorf("the stored object's fence refused the write: %w", err)
	}
	if err := fencing.Check(cur, f); err != nil {
		return 0, err
	}
	if afterCheck != nil {
		afterCheck()
	}
	return a.Generation, nil
}

// afterCheck, when set by a test, runs between the check and the write.
var afterCheck func()

func fenceOf(ctx context.Context) (fencing.Fence, error) {
	f, ok := fencing.FromContext(ctx)
	if !ok {
		return f, fencing.ErrNoFence
	}
	if err := f.Validate(); err != nil {
		return f, err
	}
	if err := fencing.Err(ctx); err != nil {
		return f, fmt.Errorf("%v: term over, not sent: %w", f, err)
	}
	return f, nil
}

// FenceOf returns the fence in an object's metadata: the zero Fence if it
// has none, and an error if it is malformed.
func FenceOf(metadata map[string]string) (fencing.Fence, error) {
	tok, hasTok := metadata[tokenMetadata]
	lease, hasLease := metadata[leaseMetadata]
	switch {
	case !hasTok && !hasLease:
		return fencing.Fence{}, nil
	case !hasTok || !hasLease:
		return fencing.Fence{}, fmt.Errorf("gcsfence: metadata has one of %s and %s without the other", tokenMetadata, leaseMetadata)
	}
	t, err := fencing.ParseToken(tok)
	if err != nil {
		return fencing.Fence{}, fmt.Errorf("gcsfence: metadata %s: %w", tokenMetadata, err)
	}
	f := fencing.Fence{Lease: lease, Token: t}
	if err := f.Validate(); err != nil {
		return fencing.Fence{}, fmt.Errorf("gcsfence: metadata %s: %w", leaseMetadata, err)
	}
	return f, nil
}

// IsTombstone reports whether an object's metadata marks it as a tombstone
// that Tombstone wrote.
func IsTombstone(metadata map[string]string) bool { return metadata[tombstoneMetadata] == "true" }

func isFenceKey(k string) bool {
	return strings.EqualFold(k, tokenMetadata) || strings.EqualFold(k, leaseMetadata) || strings.EqualFold(k, tombstoneMetadata)
}

func status(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}
