package redislease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/recordjson"
	"github.com/tenure-go/tenure/lease"
)

// DefaultPrefix is put in front of every lease name when Config.Prefix is
// empty.
const DefaultPrefix = "tenure:"

// Config configures a Store.
type Config struct {
	// Prefix is put in front of every lease name to make its key (and its
	// channel). Default DefaultPrefix.
	Prefix string
}

// Store is a lease.Store on Redis. It is safe for concurrent use. Make one
// with New.
type Store struct {
	c      redis.UniversalClient
	prefix string
}

var (
	_ lease.Store   = (*Store)(nil)
	_ lease.Lister  = (*Store)(nil)
	_ lease.Deleter = (*Store)(nil)
	_ lease.Watcher = (*Store)(nil)
	_ lease.Lossy   = (*Store)(nil)
)

// New returns a Store on c: a *redis.Client, a Sentinel client
// (redis.NewFailoverClient) or a *redis.ClusterClient. It sends nothing.
func New(c redis.UniversalClient, cfg Config) (*Store, error) {
	if c == nil {
		return nil, errors.New("redislease: nil client: pass a *redis.Client (redis.NewClient)")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	return &Store{c: c, prefix: cfg.Prefix}, nil
}

// Key returns the key (and the channel) of the lease name.
func (s *Store) Key(name string) string { return s.prefix + name }

// Lossy implements lease.Lossy: Redis may lose acknowledged writes (see the
// package doc).
func (s *Store) Lossy() bool { return true }

// Get implements lease.Store with one HGETALL (a hash of two fields; a
// key that holds other fields is no lease's, and says so).
func (s *Store) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	if err := lease.CheckGet(ctx, name); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	h, err := s.c.HGetAll(ctx, s.Key(name)).Result()
	if err != nil {
		return lease.Record{}, lease.NoVersion, s.failed(ctx, "get", name, err)
	}
	if len(h) == 0 {
		return lease.Record{}, lease.NoVersion, lease.NotFound(name)
	}
	vals := []any{nil, nil}
	if v, ok := h["v"]; ok {
		vals[0] = v
	}
	if r, ok := h["r"]; ok {
		vals[1] = r
	}
	if vals[0] == nil && vals[1] == nil {
		vals[0] = "" // a hash, but not a lease's
	}
	return s.decode(name, vals)
}

// decode reads the fields "v" and "r" of a lease's hash, as the put
// script returns them (nil for a field that is absent).
func (s *Store) decode(name string, vals []any) (lease.Record, lease.Version, error) {
	if len(vals) != 2 {
		return lease.Record{}, lease.NoVersion, fmt.Errorf("get lease %q (key %q): %d fields returned, want 2", name, s.Key(name), len(vals))
	}
	v, vok := vals[0].(string)
	r, rok := vals[1].(string)
	switch {
	case vals[0] == nil && vals[1] == nil:
		return lease.Record{}, lease.NoVersion, lease.NotFound(name)
	case !vok || !rok || v == "":
		return lease.Record{}, lease.NoVersion, &lease.RecordError{Name: name, Field: "body",
			Reason: fmt.Sprintf("the hash %q lacks the fields v and r: not a lease record", s.Key(name))}
	case len(r) > recordjson.MaxSize:
		return lease.Record{}, lease.NoVersion, &lease.RecordError{Name: name, Field: "body",
			Reason: fmt.Sprintf("value is %d bytes, limit %d: not a lease record", len(r), recordjson.MaxSize)}
	}
	rec, err := recordjson.Decode(name, []byte(r))
	if err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	return rec, lease.Version(v), nil
}

// putScript writes the hash KEYS[1] if its version is ARGV[1] ("": if
// there is none), with version ARGV[2] and record ARGV[3], and publishes
// the write on the channel named like the key. It returns {1} when it
// wrote, or had: the same call sent again (a retry after its answer was
// lost) finds its own version; else {0, version, record} as they are
// (false for absent fields).
// A key that is not a hash fails HMGET with WRONGTYPE.
var putScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'v', 'r')
if cur[1] == ARGV[2] then
	return {1} -- this very call, sent again after its answer was lost: it applied
end
if ARGV[1] == '' then
	if redis.call('EXISTS', KEYS[1]) == 1 then
		return {0, cur[1], cur[2]}
	end
elseif cur[1] ~= ARGV[1] then
	return {0, cur[1], cur[2]}
end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'r', ARGV[3])
redis.call('PUBLISH', KEYS[1], ARGV[2] .. ' ' .. ARGV[3])
return {1}
`)

// Put implements lease.Store with one script (see the package doc).
func (s *Store) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	if err := lease.CheckPut(ctx, name, rec); err != nil {
		return lease.NoVersion, err
	}
	if strings.ContainsAny(string(expect), " ") {
		return lease.NoVersion, lease.Conflict(name) // no version this store handed out
	}
	ver := recordjson.NewWriteID()
	res, err := putScript.Run(ctx, s.c, []string{s.Key(name)}, string(expect), ver, recordjson.Encode(rec, ver)).Slice()
	if err != nil {
		return lease.NoVersion, s.failed(ctx, "put", name, err)
	}
	if len(res) >= 1 && res[0] == int64(1) {
		return lease.Version(ver), nil
	}
	ce := &lease.ConflictError{Name: name}
	if len(res) == 3 && res[1] != nil {
		cur, v, err := s.decode(name, res[1:])
		if err != nil {
			return lease.NoVersion, lease.Conflict(name) // a hash that holds no record: a bare conflict
		}
		ce.Current, ce.Version, ce.Found = cur, v, true
	}
	return lease.NoVersion, ce
}

// deleteScript deletes KEYS[1] if its version is ARGV[1] ("*": whatever it
// holds) and publishes the deletion ("-"). It returns 1 when it deleted or
// there was nothing, 0 on a conflict.
var deleteScript = redis.NewScript(`
if ARGV[1] ~= '*' then
	local v = redis.call('HGET', KEYS[1], 'v')
	if v and v ~= ARGV[1] then
		return 0
	end
end
if redis.call('DEL', KEYS[1]) == 1 then
	redis.call('PUBLISH', KEYS[1], '-')
end
return 1
`)

// Delete implements lease.Deleter with one script: the key is deleted if
// its version is still expect, or whatever it holds with lease.AnyVersion.
func (s *Store) Delete(ctx context.Context, name string, expect lease.Version) error {
	if err := lease.CheckDelete(ctx, name); err != nil {
		return err
	}
	if expect == lease.NoVersion {
		return lease.Conflict(name)
	}
	n, err := deleteScript.Run(ctx, s.c, []string{s.Key(name)}, string(expect)).Int()
	if err != nil {
		return s.failed(ctx, "delete", name, err)
	}
	if n == 0 {
		return lease.Conflict(name)
	}
	return nil
}

// listPage is how many keys one SCAN asks for.
const listPage = 1000

// List implements lease.Lister with SCAN over the prefix (on every primary
// of a cluster, at once). A key written or deleted during List may or may
// not be listed; one is listed at most once.
func (s *Store) List(ctx context.Context, prefix string, fn func(name string) error) error {
	match := escapeGlob(s.Key(prefix)) + "*"
	// A cluster's primaries are scanned at once (ForEachMaster); fn is
	// called one name at a time all the same, and not after it failed.
	var mu sync.Mutex
	var stopped error
	call := func(name string) error {
		mu.Lock()
		defer mu.Unlock()
		if stopped == nil {
			stopped = fn(name)
		}
		return stopped
	}
	scan := func(ctx context.Context, c redis.Cmdable) error {
		seen := map[string]bool{} // SCAN may return a key twice
		it := c.Scan(ctx, 0, match, listPage).Iterator()
		for it.Next(ctx) {
			name, ok := strings.CutPrefix(it.Val(), s.prefix)
			if !ok || seen[name] || lease.ValidateName(name) != nil {
				continue
			}
			seen[name] = true
			if err := call(name); err != nil {
				return err
			}
		}
		if err := it.Err(); err != nil {
			return s.failed(ctx, "list", prefix+"*", err)
		}
		return nil
	}
	if cc, ok := s.c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	}
	return scan(ctx, s.c)
}

// escapeGlob escapes SCAN MATCH's special characters in s.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\^-`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// failed wraps a failed call's error: the context's error when ctx ended,
// permanent when retrying cannot cure it, and a record error for a key
// that is not a lease's hash.
func (s *Store) failed(ctx context.Context, op, name string, err error) error {
	if msg := err.Error(); strings.HasPrefix(msg, "WRONGTYPE") {
		return &lease.RecordError{Name: name, Field: "body", Reason: fmt.Sprintf("the key %q is not a hash: not a lease record", s.Key(name))}
	}
	err = lease.CallError(ctx, err)
	err = fmt.Errorf("%s lease %q (key %q): %w", op, name, s.Key(name), err)
	return classify(err)
}

// classify marks an error permanent when retrying cannot cure it, adding
// what to do.
func classify(err error) error {
	var re redis.Error
	if !errors.As(err, &re) {
		return err
	}
	msg := re.Error()
	switch {
	case strings.HasPrefix(msg, "NOPERM"):
		return lease.Permanent(fmt.Errorf("%w; allow the user tenure's commands on the prefix's keys and channels (docs/redis.md has the ACL SETUSER line)", err))
	case strings.HasPrefix(msg, "WRONGPASS"), strings.HasPrefix(msg, "NOAUTH"):
		return lease.Permanent(fmt.Errorf("%w; check the user name and password (tenure: in the URL, or TENURE_REDIS_PASSWORD)", err))
	case strings.HasPrefix(msg, "ERR unknown command"), strings.HasPrefix(msg, "NOSCRIPT No matching script"):
		return lease.Permanent(fmt.Errorf("%w; the server must run Lua scripts (EVAL): Redis 6.2 or later, or Valkey", err))
	}
	return err
}

// ACLRules returns the rules of an ACL user that may run what a Store with
// prefix sends and nothing else, for ACL SETUSER NAME on >PASSWORD RULES:
// its keys and channels, the scripts (EVALSHA, EVAL) and what they call,
// HGETALL for Get, SUBSCRIBE and PING for Watch, SCAN for List.
func ACLRules(prefix string) string {
	p := escapeGlob(prefix)
	return fmt.Sprintf("resetkeys ~%s* resetchannels &%s* -@all +evalsha +eval +hgetall +hmget +hget +hset +exists +del +publish +subscribe +ping +scan", p, p)
}
