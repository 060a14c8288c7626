package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/kube"
	"github.com/tenure-go/tenure/internal/lockcore"
	"github.com/tenure-go/tenure/lease"
)

// versionCommand implements "tenure version" and "tenure --version".
func versionCommand(stdout io.Writer) int {
	version, rev, at, dirty := "(unknown)", "", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	fmt.Fprintf(stdout, "tenure %s", version)
	if rev != "" {
		fmt.Fprintf(stdout, " (revision %s", rev)
		if at != "" {
			fmt.Fprintf(stdout, ", %s", at)
		}
		if dirty {
			fmt.Fprint(stdout, ", with changes not committed")
		}
		fmt.Fprint(stdout, ")")
	}
	fmt.Fprintf(stdout, " %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}

const listUsage = `usage: tenure list [flags] [PREFIX]

Lists every lease and lock in the store whose name starts with PREFIX:
holder, token, held or released, and when it was last written by the
writer's clock (this host cannot know a record's age from one read: tenure
status --watch observes it). Records tenure keeps beside a lease show too:
NAME::standby (the standby's), NAME::queue (a fair lock's queue),
NAME::queue.N (the slot of one of its waiters), NAME::wake (the waiter a
lock's holder wakes on release), and a semaphore's slots NAME::slot.I and
count NAME::slots (its number of slots, kept: tenure gc leaves it).

On DynamoDB a list scans the whole table, and bills it; on S3 it lists
the prefix's objects and reads each.

exit status: 0 once listed; 69 when the store cannot be read or cannot
list; 2 for bad flags.

examples:
  tenure list
  tenure list --json --store 'dynamodb://leases?region=eu-west-1' nightly/
`

// listed is one record as list and gc see it.
type listed struct {
	Name      string     `json:"name"`
	Holder    string     `json:"holder,omitempty"`
	Token     uint64     `json:"token,omitempty"`
	Released  bool       `json:"released"`
	Seconds   float64    `json:"lease_seconds,omitempty"`
	WrittenAt *time.Time `json:"written_at,omitempty"` // the writer's clock
	Error     string     `json:"error,omitempty"`      // a record no one can decode
	Foreign   bool       `json:"foreign,omitempty"`    // a Kubernetes Lease tenure did not write

	rec lease.Record
	ver lease.Version
	bad bool
}

// listRecords reads every record under prefix.
func listRecords(ctx context.Context, store lease.Store, prefix string) ([]listed, error) {
	l, ok := store.(lease.Lister)
	if !ok {
		return nil, lease.Permanent(errors.New("this store cannot list its records"))
	}
	var out []listed
	err := l.List(ctx, prefix, func(name string) error {
		rec, ver, err := store.Get(ctx, name)
		switch {
		case errors.Is(err, lease.ErrNotFound):
			return nil // deleted meanwhile
		case errors.Is(err, lease.ErrInvalidRecord):
			out = append(out, listed{Name: name, Error: err.Error(), Foreign: kube.Foreign(err), bad: true})
			return nil
		case err != nil:
			return err
		}
		w := rec.WrittenAt.UTC()
		out = append(out, listed{Name: name, Holder: rec.Holder, Token: rec.Token, Released: rec.Released,
			Seconds: rec.Duration.Seconds(), WrittenAt: &w, rec: rec, ver: ver})
		return nil
	})
	return out, err
}

// listCommand implements "tenure list".
func listCommand(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("tenure list", listUsage, stderr)
	var c common
	c.register(fs)
	asJSON := fs.Bool("json", false, "print one JSON object per record")
	if ok, status := parseFlags(fs, args, stderr); !ok {
		return status
	}
	if fs.NArg() > 1 {
		usageError(fs, stderr, "want at most one PREFIX")
		return exitUsage
	}
	if dir := c.absentDir(); dir != "" {
		fmt.Fprintf(stderr, "tenure list: the store's directory %s does not exist: nothing was ever written there (check --store)\n", dir)
		return 0
	}
	ctx := context.Background()
	store, status := c.open(ctx, "tenure list", stderr)
	if store == nil {
		return status
	}
	recs, err := listRecords(ctx, store, fs.Arg(0))
	if err != nil {
		return c.storeFailed("tenure list", err, stderr)
	}
	now := time.Now()
	for _, r := range recs {
		if *asJSON {
			b, _ := json.Marshal(r)
			fmt.Fprintf(stdout, "%s\n", b)
			continue
		}
		switch {
		case r.Foreign:
			fmt.Fprintf(stdout, "%s: FOREIGN: %s\n", r.Name, strings.TrimPrefix(r.Error, fmt.Sprintf("lease %q: invalid record: writer: ", r.Name)))
		case r.bad:
			fmt.Fprintf(stdout, "%s: INVALID: %s\n", r.Name, r.Error)
		case r.Released:
			fmt.Fprintf(stdout, "%s: released, last token %d, written %s ago by the writer's clock\n", r.Name, r.Token, now.Sub(*r.WrittenAt).Round(time.Second))
		case slotName.MatchString(r.Name):
			// A --once-per slot is never given back: it stays taken, so
			// that no replica runs the slot again.
			lock := r.Name[:strings.LastIndexByte(r.Name, '/')]
			fmt.Fprintf(stdout, "%s: once-per slot of %s, taken by %q (token %d), written %s ago by the writer's clock: it stays taken so that the slot runs once (its lease, %v, keeps it); tenure gc removes it once that and --older-than (24h) have passed\n",
				r.Name, lock, r.Holder, r.Token, now.Sub(*r.WrittenAt).Round(time.Second), r.rec.Duration)
		default:
			fmt.Fprintf(stdout, "%s: held by %q, token %d, lease %v, written %s ago by the writer's clock\n", r.Name, r.Holder, r.Token, r.rec.Duration, now.Sub(*r.WrittenAt).Round(time.Second))
		}
	}
	return 0
}

const releaseUsage = `usage: tenure release --force [--now] [flags] NAME

Breaks a stuck lease or lock: a fenced takeover, by compare-and-swap on the
record it read. It never deletes a readable record and never lets a token
go back.

By default it writes the record held by tenure-release-force@HOST at the
holder's token + 1, as a holder that then went silent would: every taker
waits it out (the lease × (1+max drift), on its own clock, from when it
first sees it) before taking the lease, exactly as after a crash. The old
holder learns at its next renewal, which fails (its term ends, and tenure
run or lock stops its command); one that cannot renew (paused, cut off)
stops believing at its own deadline. Either way its belief ends before the
next holder's begins: at most one process believes it holds the lease.

--now writes the record released, so that the next holder may take it at
once. Use it only when the holder is known dead (its host is down, its
process gone): a holder that still runs believes until its next renewal
(up to a third of the lease), so for that time two processes may each
believe they hold it. Resources fenced on tokens refuse the old holder
once the next holder has written, but anything unfenced may see both. So
--now first watches the holder for a renewal (up to half its lease), and
refuses, saying so, if it renews or if the record was released by force
less than a lease ago (its old holder may still believe); add
--accept-overlap to go on all the same.

A renewal that lands between the read and the write makes the write fail;
the command then reads and tries again, up to 5 times.

The records tenure keeps beside a lease (NAME::queue, NAME::wake,
NAME::standby, a group's NAME::members, a semaphore's NAME::slots) hold
no command, and are written released; a semaphore's slots (NAME::slot.I)
are leases, and are released as above.

A record no one can decode (tenure says "invalid record") is replaced, at
the token a lost record's successor would mint: the current Unix time in
milliseconds, above every token minted before it if clocks agree within
minutes; held for --lease unless --now.

exit status: 0 when released (or nothing was held); 75 when the record
changed meanwhile 5 times in a row (read it again, and run again if still
stuck); 69 when the store refuses; 2 for bad flags, without --force, or
when --now would overlap a holder that may still run (see above).

examples:
  tenure release --force nightly
  tenure release --force --now nightly     # its holder's host is gone for good
  tenure release --force --store 'dynamodb://leases?region=eu-west-1' writer
`

// ownRecord reports whether name is one of the records tenure keeps beside
// a lease ("::" in it) that no command holds: all but a semaphore's slots
// (NAME::slot.I), which are leases.
func ownRecord(name string) bool {
	return strings.Contains(name, "::") && !strings.Contains(name, lockcore.SlotSuffix)
}

// forceHolder holds the record a forced release writes, unless --now.
const forceHolder = "tenure-release-force"

// releaseTries is how many times release --force reads and writes again
// when the record changed in between (a renewal landed): a holder renews
// a few times a lease, so a second try nearly always finds it still.
const releaseTries = 5

// releaseCommand implements "tenure release --force".
func releaseCommand(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("tenure release", releaseUsage, stderr)
	var c common
	c.register(fs)
	var o releaseOpts
	force := fs.Bool("force", false, "required: release whoever holds it, cutting its work off")
	fs.BoolVar(&o.now, "now", false, "let the next holder take it at once, not after the lease: only for a holder known dead (two may believe otherwise)")
	fs.BoolVar(&o.overlap, "accept-overlap", false, "with --now: go on although the holder was seen renewing, or was released by force less than a lease ago (two may run at once)")
	fs.DurationVar(&o.ttl, "lease", 10*time.Second, "with a record no one can decode: how long takers wait before taking it (the lease its holders use)")
	if ok, status := parseFlags(fs, args, stderr); !ok {
		return status
	}
	if fs.NArg() != 1 {
		usageError(fs, stderr, "want one NAME")
		return exitUsage
	}
	o.name = fs.Arg(0)
	if err := lease.ValidateName(o.name); err != nil {
		fmt.Fprintf(stderr, "tenure release: %s\n", bare(err))
		return exitUsage
	}
	if !*force {
		fmt.Fprintln(stderr, "tenure release: this cuts the holder's work off: say --force (see tenure release -h)")
		return exitUsage
	}
	if o.overlap && !o.now {
		fmt.Fprintln(stderr, "tenure release: --accept-overlap goes with --now")
		return exitUsage
	}
	if dir := c.absentDir(); dir != "" {
		fmt.Fprintf(stdout, "%s: no record: nothing to release (the store's directory %s does not exist: check --store)\n", o.name, dir)
		return 0
	}
	ctx := context.Background()
	store, status := c.open(ctx, "tenure release", stderr)
	if store == nil {
		return status
	}
	if o.ttl < lease.MinDuration || o.ttl > lease.MaxDuration {
		fmt.Fprintf(stderr, "tenure release: --lease %v: want %v to %v\n", o.ttl, lease.MinDuration, lease.MaxDuration)
		return exitUsage
	}
	o.holder = forceHolder
	if host, err := os.Hostname(); err == nil && host != "" && len(host) < 200 && strings.Trim(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") == "" {
		o.holder += "@" + host
	}
	if status := o.releaseRetrying(ctx, store, stdout, stderr); status != exitUnavailable {
		return status
	}
	return c.storeFailed("tenure release", o.err, stderr)
}

// releaseRetrying releases, reading and writing again while the record
// changes in between, up to releaseTries times.
func (o *releaseOpts) releaseRetrying(ctx context.Context, store lease.Store, stdout, stderr io.Writer) int {
	for try := 1; ; try++ {
		status, again := o.release(ctx, store, stdout, stderr)
		switch {
		case again && try < releaseTries:
			continue // a renewal landed between the read and the write: read again
		case again:
			fmt.Fprintf(stderr, "tenure release: %s changed while being released, %d times in a row (a holder renewing, or another release): read it with tenure status, and run again\n", o.name, releaseTries)
			return exitLocked
		}
		return status
	}
}

// releaseOpts is one release --force: its flags, and the last store error.
type releaseOpts struct {
	name, holder string
	now, overlap bool
	ttl          time.Duration
	err          error // the store's, with exitUnavailable
}

// release reads the record and writes its release once. It returns the
// exit status, or again when the record changed in between.
func (o *releaseOpts) release(ctx context.Context, store lease.Store, stdout, stderr io.Writer) (status int, again bool) {
	name := o.name
	rec := lease.Record{Holder: o.holder, Released: o.now, Nonce: nonce(), WrittenAt: time.Now().UTC()}
	cur, ver, err := store.Get(ctx, name)
	expect := ver
	switch {
	case errors.Is(err, lease.ErrNotFound):
		fmt.Fprintf(stdout, "%s: no record: nothing to release\n", name)
		return 0, false
	case errors.Is(err, lease.ErrInvalidRecord):
		d, ok := store.(lease.Deleter)
		if !ok {
			o.err = lease.Permanent(fmt.Errorf("%w; this store cannot delete it: remove it by hand", err))
			return exitUnavailable, false
		}
		if err := d.Delete(ctx, name, lease.AnyVersion); err != nil && !errors.Is(err, lease.ErrNotFound) {
			o.err = err
			return exitUnavailable, false
		}
		rec.Token, rec.Duration, expect = uint64(time.Now().UnixMilli()), o.ttl, lease.NoVersion
		fmt.Fprintf(stdout, "%s: removed a record no one could read (%v)\n", name, err)
	case err != nil:
		o.err = err
		return exitUnavailable, false
	case cur.Released:
		fmt.Fprintf(stdout, "%s: already released (last token %d)\n", name, cur.Token)
		return 0, false
	case strings.HasPrefix(cur.Holder, forceHolder) && !o.now:
		fmt.Fprintf(stdout, "%s: already released by force (token %d): taken once %v has passed unrenewed; --now to free it at once\n", name, cur.Token, cur.Duration)
		return 0, false
	case strings.HasSuffix(name, lockcore.SlotsSuffix):
		// A semaphore's count record: released, its n kept for humans. No
		// holder believes in it; callers that find it released write it
		// again only once every slot has drained.
		rec.Token, rec.Duration, rec.Released, rec.Payload = cur.Token+1, cur.Duration, true, cur.Payload
	case ownRecord(name):
		// tenure's own record beside a lease (a queue, a wake record, a
		// standby's, a group's members): no command runs under it, and
		// its protocol takes a released one as given back.
		rec.Token, rec.Duration, rec.Released = cur.Token+1, cur.Duration, true
	default:
		if o.now && !o.overlap {
			if status, again := o.checkNow(ctx, store, cur, ver, stderr); status != 0 || again {
				return status, again
			}
		}
		rec.Token, rec.Duration = cur.Token+1, cur.Duration
	}
	if _, err := store.Put(ctx, name, rec, expect); err != nil {
		if errors.Is(err, lease.ErrConflict) {
			return 0, true
		}
		o.err = err
		return exitUnavailable, false
	}
	wait := time.Duration(math.Ceil(float64(rec.Duration) * (1 + election.DefaultMaxDrift)))
	switch {
	case expect == lease.NoVersion && o.now:
		fmt.Fprintf(stdout, "%s: written released at token %d: the next holder may take it at once\n", name, rec.Token)
	case expect == lease.NoVersion:
		fmt.Fprintf(stdout, "%s: written held by %s at token %d: the next holder takes it once %v has passed unrenewed by its clock (the --lease, stretched by the clocks' drift), not before about %s by this host's clock\n",
			name, rec.Holder, rec.Token, wait, time.Now().Add(wait).Format(time.TimeOnly))
	case strings.HasSuffix(name, lockcore.SlotsSuffix):
		fmt.Fprintf(stdout, "%s: released (it said %q slots); the next caller writes its own n once every slot has drained: holders of the old n leave first\n", name, cur.Payload)
	case ownRecord(name):
		fmt.Fprintf(stdout, "%s: released from %q (token %d)\n", name, cur.Holder, cur.Token)
	case o.now:
		fmt.Fprintf(stdout, "%s: released from %q (token %d) at once: the next holder may start before it stops; its next renewal fails, and the next holder's token is above %d\n", name, cur.Holder, cur.Token, rec.Token)
	default:
		fmt.Fprintf(stdout, "%s: released from %q (token %d) by a record held by %s at token %d: %q stops at its next renewal, which fails, or at its own deadline, within %v; the next holder takes it once %v has passed unrenewed by its clock, not before about %s by this host's clock, at a token above %d\n",
			name, cur.Holder, cur.Token, rec.Holder, rec.Token, cur.Holder, cur.Duration, wait, time.Now().Add(wait).Format(time.TimeOnly), rec.Token)
	}
	return 0, false
}

// checkNow refuses --now, unless --accept-overlap, where its holder may
// still be running: a record released by force less than a lease ago (by
// the clock of the host that forced it: its old holder may believe until
// its own deadline), or a holder seen renewing. A holder is watched for a
// renewal for up to half its lease.
func (o *releaseOpts) checkNow(ctx context.Context, store lease.Store, cur lease.Record, ver lease.Version, stderr io.Writer) (status int, again bool) {
	if strings.HasPrefix(cur.Holder, forceHolder) {
		if age := time.Since(cur.WrittenAt); age < cur.Duration {
			fmt.Fprintf(stderr, "tenure release: %s was released by force %v ago (by the clock of %s): its old holder may still believe it holds it until its own deadline, up to %v after that. --now would let the next holder start at once, beside it. Wait until %s has passed, or run without --now (the next holder then waits it out), or add --accept-overlap to free it now all the same\n",
				o.name, age.Round(time.Millisecond), strings.TrimPrefix(cur.Holder, forceHolder+"@"), cur.Duration, cur.Duration-age)
			return exitUsage, false
		}
		return 0, false
	}
	watch := cur.Duration / 2
	fmt.Fprintf(stderr, "tenure release: watching %s for a renewal by %q, up to %v...\n", o.name, cur.Holder, watch)
	tick := time.NewTicker(min(250*time.Millisecond, watch))
	defer tick.Stop()
	for end := time.Now().Add(watch); time.Now().Before(end); {
		<-tick.C
		rec, v, err := store.Get(ctx, o.name)
		switch {
		case err != nil || rec.Holder != cur.Holder || rec.Token != cur.Token || rec.Released:
			return 0, true // it changed: read it again
		case v != ver:
			fmt.Fprintf(stderr, "tenure release: %q renewed %s just now (token %d): it is running. --now frees the lease at once: the next holder may start before %q's next renewal fails, and both run meanwhile. Without --now the next holder waits until it has stopped. Add --accept-overlap to free it now all the same\n",
				cur.Holder, o.name, cur.Token, cur.Holder)
			return exitUsage, false
		}
	}
	return 0, false
}

func nonce() string {
	var b [8]byte
	_, _ = crand.Read(b[:])
	return "release-" + hex.EncodeToString(b[:])
}

const gcUsage = `usage: tenure gc [flags] [PREFIX]

Removes records no longer needed, under PREFIX, and only those, each by
compare-and-swap on the version it read (a record that changed meanwhile
stays):
  - released leases and locks last written more than --older-than ago;
  - --once-per slots (NAME/20261124T150500Z) that ended more than
    --older-than ago;
  - a lease's standby record, a fair lock's queue and queue slots, and a
    lock's wake record, that no one has written for --older-than (their
    writers are gone).
A record is removed only if its token is below the current Unix time in
milliseconds less --older-than: whoever creates the name again mints at
least its own Unix time in milliseconds (the lost-record rule), so a
token never goes back for a name still in use, given clocks within
--older-than of each other. Held leases and locks are never removed.

Run it from cron, e.g. daily. On DynamoDB it scans the table; on MinIO a
record written between the read and the delete may be removed too (MinIO
ignores the delete's condition), which ends that holder's term early and
is otherwise safe.

exit status: 0 once done; 69 when the store refuses or cannot list or
delete; 2 for bad flags.

examples:
  tenure gc --dry-run
  17 3 * * * tenure gc --store 'dynamodb://leases?region=eu-west-1'
`

// slotName matches a --once-per slot's lock name, and captures its start.
var slotName = regexp.MustCompile(`/(\d{8}T\d{6}Z)$`)

// queueSlot matches the slot records of a fair lock's queue (NAME::queue.N).
var queueSlot = regexp.MustCompile(`::queue\.\d+$`)

// gcCommand implements "tenure gc".
func gcCommand(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("tenure gc", gcUsage, stderr)
	var c common
	c.register(fs)
	olderThan := fs.Duration("older-than", 24*time.Hour, "remove only what has not been written for this long")
	dryRun := fs.Bool("dry-run", false, "say what would be removed, and remove nothing")
	if ok, status := parseFlags(fs, args, stderr); !ok {
		return status
	}
	if fs.NArg() > 1 {
		usageError(fs, stderr, "want at most one PREFIX")
		return exitUsage
	}
	if *olderThan < time.Hour {
		fmt.Fprintf(stderr, "tenure gc: --older-than %v: want an hour at least: a record is removed only if its token is below the Unix time in milliseconds --older-than ago, so that whoever creates the name again mints above it, which holds while clocks agree within --older-than\n", *olderThan)
		return exitUsage
	}
	if dir := c.absentDir(); dir != "" {
		fmt.Fprintf(stdout, "nothing to remove: the store's directory %s does not exist (check --store)\n", dir)
		return 0
	}
	ctx := context.Background()
	store, status := c.open(ctx, "tenure gc", stderr)
	if store == nil {
		return status
	}
	d, ok := store.(lease.Deleter)
	if !ok {
		return c.storeFailed("tenure gc", lease.Permanent(errors.New("this store cannot delete records")), stderr)
	}
	recs, err := listRecords(ctx, store, fs.Arg(0))
	if err != nil {
		return c.storeFailed("tenure gc", err, stderr)
	}
	now := time.Now()
	removed, would := 0, 0
	for _, r := range recs {
		why := needless(r, now, *olderThan)
		if why == "" {
			continue
		}
		if *dryRun {
			would++
			fmt.Fprintf(stdout, "would remove %s (%s, token %d)\n", r.Name, why, r.Token)
			continue
		}
		err := d.Delete(ctx, r.Name, r.ver)
		switch {
		case errors.Is(err, lease.ErrConflict):
			fmt.Fprintf(stdout, "kept %s: it changed meanwhile\n", r.Name)
			continue
		case err != nil && !errors.Is(err, lease.ErrNotFound):
			return c.storeFailed("tenure gc", err, stderr)
		}
		removed++
		fmt.Fprintf(stdout, "removed %s (%s, token %d)\n", r.Name, why, r.Token)
	}
	if *dryRun {
		fmt.Fprintf(stdout, "%d of %d records would be removed (--dry-run: none was)\n", would, len(recs))
	} else {
		fmt.Fprintf(stdout, "%d of %d records removed\n", removed, len(recs))
	}
	return 0
}

// needless says why gc may remove r, or "" if it may not.
func needless(r listed, now time.Time, olderThan time.Duration) string {
	if r.bad || r.Token >= uint64(now.Add(-olderThan).UnixMilli()) {
		return "" // a token too recent to be sure a new one is above it
	}
	old := now.Sub(r.rec.WrittenAt) > olderThan
	switch {
	case r.Released && old:
		return "released"
	case strings.HasSuffix(r.Name, "::queue") || strings.HasSuffix(r.Name, "::standby") || strings.HasSuffix(r.Name, "::wake") || queueSlot.MatchString(r.Name):
		if old {
			return "no one has written it"
		}
	default:
		if m := slotName.FindStringSubmatch(r.Name); m != nil {
			start, err := time.Parse("20060102T150405Z", m[1])
			if err == nil && now.Sub(start.Add(r.rec.Duration)) > olderThan && old {
				return "a past slot"
			}
		}
	}
	return ""
}
