// Package natslease is a lease.Store on a NATS JetStream key-value bucket,
// through github.com/nats-io/nats.go/jetstream. docs/nats.md is the
// manual; this is the contract.
//
// # The conditional primitive
//
// A lease is a key of the bucket; its value is tenure's JSON record (the
// format lease/s3lease documents), and its version is the key's revision
// (the stream's sequence), in decimal. A write creates the key (Create: no
// message on its subject, or a deletion marker) or updates it at the
// revision expected (Update: the server's expected last sequence per
// subject), so of any number of writers that read the same revision one
// succeeds. A lease name is its key, with ":" written "=c" and a "." that
// would end the key or a token "=d" (a NATS key's tokens are "."
// separated and may not be empty; "=" is in no lease name).
//
// # What a restart or a leader change takes away
//
// A NATS server acknowledges a write once it is in the stream, and by
// default flushes the stream to disk every two minutes (sync_interval), so
// a server that crashes loses what it had acknowledged since; a stream
// replicated on three servers loses it only if they all go down at once.
// Such a loss is a lost record to tenure (the key goes back to an earlier
// revision, or vanishes), which the protocol covers (docs/protocol.md),
// and Store is a lease.Lossy store: every takeover mints a token of at
// least the wall time in Unix milliseconds. A revision is a sequence, so
// after such a loss the server hands out the lost revisions again: a
// holder whose renewal was lost may renew over the record that replaced
// it, once; the fence refuses it (its token is the lower) and the next
// renewal of the record's holder ends that holder's term. With
// sync_interval: always on every server, or a stream of three replicas
// that never all crash together, no acknowledged write is lost and none of
// this arises; docs/nats.md says what each setting promises.
//
// Per-key TTLs and the bucket's max age are not used: tenure judges expiry
// on its own clock from the record's lease duration; a bucket whose
// entries expire would lose records.
//
// # The change feed
//
// Watch runs the bucket's watcher on the key, for new writes only (an
// ordered consumer, which resumes by itself after a reconnection): each
// entry carries the record written.
//
// # Errors
//
// A permission violation, a missing bucket and JetStream not enabled are
// wrapped with lease.Permanent (the tenure command exits 69). A
// disconnection or a timeout is transient: tenure retries within the
// lease's timings.
package natslease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tenure-go/tenure/internal/recordjson"
	"github.com/tenure-go/tenure/internal/relisten"
	"github.com/tenure-go/tenure/lease"
)

// Store is a lease.Store on a JetStream key-value bucket. It is safe for
// concurrent use. Make one with New.
type Store struct {
	kv jetstream.KeyValue

	// With Open: the bucket is bound at the first call that needs it.
	bind   func(context.Context) (jetstream.KeyValue, error)
	js     jetstream.JetStream // Open's: its connection tells of refused publishes
	mu     sync.Mutex
	bucket string
}

var (
	_ lease.Store   = (*Store)(nil)
	_ lease.Lister  = (*Store)(nil)
	_ lease.Deleter = (*Store)(nil)
	_ lease.Watcher = (*Store)(nil)
	_ lease.Lossy   = (*Store)(nil)
)

// New returns a Store on the bucket kv (jetstream.New(nc), then
// js.KeyValue or CreateBucket). It sends nothing.
func New(kv jetstream.KeyValue) (*Store, error) {
	if kv == nil {
		return nil, errors.New("natslease: nil bucket: pass js.KeyValue(ctx, BUCKET) (see CreateBucket)")
	}
	return &Store{kv: kv, bucket: kv.Bucket()}, nil
}

// Open returns a Store on the bucket named, bound at the first call (so
// that a server down when a process starts is retried like any outage),
// and created then, if create is set, as CreateBucket does.
func Open(js jetstream.JetStream, bucket string, create bool, replicas int) (*Store, error) {
	if js == nil {
		return nil, errors.New("natslease: nil JetStream: pass jetstream.New(nc)")
	}
	return &Store{bucket: bucket, js: js, bind: func(ctx context.Context) (jetstream.KeyValue, error) {
		if create {
			return CreateBucket(ctx, js, bucket, replicas)
		}
		return js.KeyValue(ctx, bucket)
	}}, nil
}

// bucketOf returns the bucket, binding it first with Open's.
func (s *Store) bucketOf(ctx context.Context) (jetstream.KeyValue, error) {
	if s.bind == nil {
		return s.kv, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kv == nil {
		kv, err := s.bind(ctx)
		if err != nil {
			return nil, err
		}
		s.kv = kv
	}
	return s.kv, nil
}

// CreateBucket creates the bucket for leases if it does not exist, with
// one revision kept per key, file storage and the replicas given (1 or 3;
// 0 is 1), and no expiry, and returns it.
func CreateBucket(ctx context.Context, js jetstream.JetStream, bucket string, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: bucket, Description: "tenure leases", History: 1,
		Storage: jetstream.FileStorage, Replicas: max(replicas, 1),
	})
	if err != nil {
		return nil, classify(fmt.Errorf("create bucket %q: %w", bucket, err))
	}
	return kv, nil
}

// Lossy implements lease.Lossy: a NATS server may lose acknowledged writes
// (see the package doc).
func (s *Store) Lossy() bool { return true }

// Key returns the bucket's key of the lease name.
func Key(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == ':':
			b.WriteString("=c")
		case c == '.' && (i == len(name)-1 || name[i+1] == '.'):
			b.WriteString("=d")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// nameOf returns the lease name of a key, or false for a key no lease has.
func nameOf(key string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c != '=' {
			b.WriteByte(c)
			continue
		}
		if i+1 == len(key) {
			return "", false
		}
		i++
		switch key[i] {
		case 'c':
			b.WriteByte(':')
		case 'd':
			b.WriteByte('.')
		default:
			return "", false
		}
	}
	name := b.String()
	return name, lease.ValidateName(name) == nil && Key(name) == key
}

// Get implements lease.Store with one read of the key's last revision.
func (s *Store) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	if err := lease.CheckGet(ctx, name); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	kv, err := s.bucketOf(ctx)
	if err != nil {
		return lease.Record{}, lease.NoVersion, s.failed(ctx, "get", name, err)
	}
	e, err := kv.Get(ctx, Key(name))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return lease.Record{}, lease.NoVersion, lease.NotFound(name)
	}
	if err != nil {
		return lease.Record{}, lease.NoVersion, s.failed(ctx, "get", name, err)
	}
	return decode(name, e)
}

func decode(name string, e jetstream.KeyValueEntry) (lease.Record, lease.Version, error) {
	if v := e.Value(); len(v) > recordjson.MaxSize {
		return lease.Record{}, lease.NoVersion, &lease.RecordError{Name: name, Field: "body",
			Reason: fmt.Sprintf("value is %d bytes, limit %d: not a lease record", len(v), recordjson.MaxSize)}
	}
	rec, err := recordjson.Decode(name, e.Value())
	if err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	return rec, version(e.Revision()), nil
}

func version(rev uint64) lease.Version { return lease.Version(strconv.FormatUint(rev, 10)) }

// Put implements lease.Store with Create or Update (see the package doc).
func (s *Store) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	if err := lease.CheckPut(ctx, name, rec); err != nil {
		return lease.NoVersion, err
	}
	kv, err := s.bucketOf(ctx)
	if err != nil {
		return lease.NoVersion, s.failed(ctx, "put", name, err)
	}
	body := recordjson.Encode(rec, recordjson.NewWriteID())
	var rev uint64
	if expect == lease.NoVersion {
		rev, err = kv.Create(ctx, Key(name), body)
	} else {
		last, perr := strconv.ParseUint(string(expect), 10, 64)
		if perr != nil || last == 0 {
			return lease.NoVersion, lease.Conflict(name) // no revision this store handed out
		}
		rev, err = kv.Update(ctx, Key(name), body, last)
	}
	switch {
	case err == nil:
		return version(rev), nil
	case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return lease.NoVersion, lease.Conflict(name)
	}
	return lease.NoVersion, s.failed(ctx, "put", name, err)
}

// Delete implements lease.Deleter: a deletion marker, at the revision
// expected (or whatever is stored, with lease.AnyVersion).
func (s *Store) Delete(ctx context.Context, name string, expect lease.Version) error {
	if err := lease.CheckDelete(ctx, name); err != nil {
		return err
	}
	kv, err := s.bucketOf(ctx)
	if err != nil {
		return s.failed(ctx, "delete", name, err)
	}
	var opts []jetstream.KVDeleteOpt
	if expect != lease.AnyVersion {
		last, err := strconv.ParseUint(string(expect), 10, 64)
		if err != nil || last == 0 {
			return lease.Conflict(name)
		}
		opts = append(opts, jetstream.LastRevision(last))
	}
	err = kv.Delete(ctx, Key(name), opts...)
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return lease.Conflict(name)
	}
	if err != nil {
		return s.failed(ctx, "delete", name, err)
	}
	return nil
}

// List implements lease.Lister with the bucket's key lister (a watcher of
// every key's last revision, deletions left out).
func (s *Store) List(ctx context.Context, prefix string, fn func(name string) error) error {
	kv, err := s.bucketOf(ctx)
	if err != nil {
		return s.failed(ctx, "list", prefix+"*", err)
	}
	kl, err := kv.ListKeys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil
	}
	if err != nil {
		return s.failed(ctx, "list", prefix+"*", err)
	}
	defer kl.Stop()
	for key := range kl.Keys() {
		name, ok := nameOf(key)
		if !ok || !strings.HasPrefix(name, prefix) {
			continue
		}
		if err := fn(name); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// Watch implements lease.Watcher with the bucket's watcher on the key, new
// writes only; one that ends (the connection closed) is started again and
// fn told with NoVersion.
func (s *Store) Watch(ctx context.Context, name string, fn func(lease.Event)) error {
	if err := lease.CheckGet(ctx, name); err != nil {
		return err
	}
	var pause relisten.Backoff
	for {
		kv, err := s.bucketOf(ctx)
		var w jetstream.KeyWatcher
		if err == nil {
			w, err = kv.Watch(ctx, Key(name), jetstream.UpdatesOnly())
		}
		if err == nil {
			pause.Reset()
			fn(lease.Event{}) // listening from now: what came before, a read finds
			s.follow(ctx, name, w, fn)
			_ = w.Stop()
		} else if err = s.failed(ctx, "watch", name, err); errors.Is(err, lease.ErrPermanent) {
			return err
		}
		if ctx.Err() != nil {
			return s.failed(ctx, "watch", name, ctx.Err())
		}
		if !pause.Wait(ctx) {
			return s.failed(ctx, "watch", name, ctx.Err())
		}
	}
}

// follow passes w's entries to fn until w ends or ctx is done.
func (s *Store) follow(ctx context.Context, name string, w jetstream.KeyWatcher, fn func(lease.Event)) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				continue
			}
			if e.Operation() != jetstream.KeyValuePut {
				fn(lease.Event{}) // deleted or purged
				continue
			}
			ev := lease.Event{Version: version(e.Revision())}
			if rec, _, err := decode(name, e); err == nil {
				ev.Record, ev.Released = &rec, rec.Released
			}
			fn(ev)
		}
	}
}

// failed wraps a failed call's error: the context's error when ctx ended,
// and permanent when retrying cannot cure it.
func (s *Store) failed(ctx context.Context, op, name string, err error) error {
	if errors.Is(err, jetstream.ErrNoStreamResponse) && ctx.Err() == nil {
		// No stream took the write: the bucket is gone, or its stream is
		// between leaders. Its status tells which.
		if kv, _ := s.bucketOf(ctx); kv != nil {
			if _, serr := kv.Status(ctx); errors.Is(serr, jetstream.ErrBucketNotFound) || errors.Is(serr, jetstream.ErrStreamNotFound) {
				err = fmt.Errorf("%w (%w)", jetstream.ErrBucketNotFound, err)
			}
		}
	}
	if s.js != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)) {
		// The server refuses a publish out of band (-ERR): the request
		// only times out, and the connection remembers why.
		if last := s.js.Conn().LastError(); last != nil && errors.Is(last, nats.ErrPermissionViolation) ||
			last != nil && strings.Contains(strings.ToLower(last.Error()), "permissions violation") {
			err = fmt.Errorf("%w (the server said: %w)", err, last)
		}
	}
	err = lease.CallError(ctx, err)
	return classify(fmt.Errorf("%s lease %q (key %q): %w", op, name, Key(name), err))
}

// classify marks an error permanent when retrying cannot cure it, adding
// what to do.
func classify(err error) error {
	msg := strings.ToLower(err.Error())
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound), errors.Is(err, nats.ErrBucketNotFound):
		return lease.Permanent(fmt.Errorf("%w; create it (tenure: create=true in the store URL; or natslease.CreateBucket; or nats kv add BUCKET --history 1)", err))
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return lease.Permanent(fmt.Errorf("%w; start nats-server with JetStream (-js, or a jetstream block in its configuration)", err))
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrPermissionViolation), strings.Contains(msg, "permissions violation"):
		return lease.Permanent(fmt.Errorf("%w; allow the user the bucket's subjects ($KV.BUCKET.>) and the JetStream API ($JS.API.>): docs/nats.md", err))
	case errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked), strings.Contains(msg, "authorization violation"):
		return lease.Permanent(fmt.Errorf("%w; check the credentials", err))
	}
	return err
}
