package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/internal/lockcore"
	"github.com/tenure-go/tenure/lease"
)

const statusUsage = `usage: tenure status [flags] NAME

Reads the lease or lock NAME, never writing, and prints its holder, token,
payload, whether it was released, and when it was last written. With
--watch it keeps reading (every --poll) and prints a line at each change:
another holder or token, a release, the record vanishing, the holder going
silent (unchanged longer than its lease, as this host's clock measures it).
The record's age is this host's observation: how long it has seen the same
version, not what the writer's clock says.

Payloads can hold addresses: status shows them to whoever can read the
store.

A semaphore's name (tenure lock --slots) shows each slot's holder.

exit status (one read, as flock -n answers): 0 when the record is held (by a
holder that may have died since: only --watch can tell, by seeing it
unchanged for longer than its lease); 3 when it was released (free); 4 when
there is no record (free, never taken or removed); 69 when the store cannot
be read; 2 for bad flags. With --watch: 0 once interrupted.

examples:
  tenure status nightly
  tenure status --json --store 'dynamodb://leases?region=eu-west-1' writer
  tenure status --watch api-singleton
`

// statusCommand implements "tenure status".
func statusCommand(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("tenure status", statusUsage, stderr)
	var c common
	c.register(fs)
	asJSON := fs.Bool("json", false, "print JSON (one object per line with --watch)")
	watch := fs.Bool("watch", false, "keep reading and print each change, until interrupted")
	poll := fs.Duration("poll", 2*time.Second, "with --watch: how often to read")
	if ok, status := parseFlags(fs, args, stderr); !ok {
		return status
	}
	if *poll <= 0 {
		fmt.Fprintf(stderr, "tenure status: --poll %v: want a positive duration\n", *poll)
		return exitUsage
	}
	if fs.NArg() != 1 {
		usageError(fs, stderr, "want one lease NAME")
		return exitUsage
	}
	name := fs.Arg(0)
	if err := lease.ValidateName(name); err != nil { // "::" allowed: its records are worth reading
		fmt.Fprintf(stderr, "tenure status: %s\n", bare(err))
		return exitUsage
	}
	if dir := c.absentDir(); dir != "" && !*watch {
		// Read-only: the directory is not made, and so holds no record.
		printObservation(stdout, tenure.Observation{Lease: name, At: time.Now()}, *asJSON, false)
		fmt.Fprintf(stderr, "tenure status: the store's directory %s does not exist: nothing was ever written there (check --store)\n", dir)
		return exitAbsent
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, status := c.open(ctx, "tenure status", stderr)
	if store == nil {
		return status
	}
	newSignals(func(os.Signal) { cancel() })
	var last tenure.Observation
	err := tenure.Watch(ctx, tenure.WatchConfig{Lease: name, Store: store, Timing: tenure.Timing{PollInterval: *poll}}, func(o tenure.Observation) {
		last = o
		if !*watch && !o.Found {
			// No record (a semaphore's name, perhaps), or none readable:
			// said once, below.
			cancel()
			return
		}
		printObservation(stdout, o, *asJSON, *watch)
		if !*watch {
			cancel()
		}
	})
	switch {
	case errors.Is(err, lease.ErrPermanent), errors.Is(err, lease.ErrInvalidRecord):
		return c.storeFailed("tenure status", err, stderr)
	case err != nil && !errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "tenure status: %s\n", bare(err))
		return exitUsage
	case *watch:
		return 0
	case last.Err != nil && !last.Found:
		return c.storeFailed("tenure status", last.Err, stderr)
	case !last.Found:
		status, isSem, err := semaphoreStatus(context.Background(), store, name, stdout, *asJSON)
		if err != nil {
			return c.storeFailed("tenure status", fmt.Errorf("read %s: %w", name+lockcore.SlotsSuffix, err), stderr)
		}
		if isSem {
			return status
		}
		printObservation(stdout, last, *asJSON, false)
		return exitAbsent
	case last.Released:
		return exitFree
	}
	return 0
}

// semCount reads the count record of the semaphore name: its n, or 0 when
// there is none standing (absent, released, or not a count record).
func semCount(ctx context.Context, store lease.Store, name string) (int, error) {
	rec, _, err := store.Get(ctx, name+lockcore.SlotsSuffix)
	switch {
	case errors.Is(err, lease.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	case rec.Released:
		return 0, nil
	}
	n, err := strconv.Atoi(string(rec.Payload))
	if err != nil || n < 1 || n > lockcore.MaxSlots {
		return 0, nil
	}
	return n, nil
}

// semaphoreStatus prints the semaphore name's slots, if name is one: each
// slot's holder, or free. It returns the status (0 if any slot is held, 3
// if none), whether name is a semaphore, and the count record's read error.
func semaphoreStatus(ctx context.Context, store lease.Store, name string, w io.Writer, asJSON bool) (int, bool, error) {
	n, err := semCount(ctx, store, name)
	if err != nil || n == 0 {
		return 0, false, err
	}
	type slotJSON struct {
		Slot     int    `json:"slot"`
		Found    bool   `json:"found"`
		Holder   string `json:"holder,omitempty"`
		Token    uint64 `json:"token,omitempty"`
		Released bool   `json:"released"`
		Error    string `json:"error,omitempty"`
	}
	out := struct {
		Lease string     `json:"lease"`
		Slots int        `json:"slots"`
		Held  int        `json:"held"`
		List  []slotJSON `json:"slot_holders"`
	}{Lease: name, Slots: n}
	for i := range n {
		rec, _, err := store.Get(ctx, lockcore.SlotName(name, i))
		sj := slotJSON{Slot: i, Found: err == nil, Released: rec.Released}
		switch {
		case err == nil && !rec.Released:
			sj.Holder, sj.Token = rec.Holder, rec.Token
			out.Held++
		case err != nil && !errors.Is(err, lease.ErrNotFound):
			sj.Error = err.Error()
		}
		out.List = append(out.List, sj)
	}
	if asJSON {
		b, _ := json.Marshal(out)
		fmt.Fprintf(w, "%s\n", b)
	} else {
		fmt.Fprintf(w, "%s: a semaphore of %d slots (%s), %d held\n", name, n, name+lockcore.SlotsSuffix, out.Held)
		for _, sj := range out.List {
			switch {
			case sj.Error != "":
				fmt.Fprintf(w, "  slot %d: cannot read: %s\n", sj.Slot, sj.Error)
			case sj.Holder != "":
				fmt.Fprintf(w, "  slot %d: held by %q, token %d\n", sj.Slot, sj.Holder, sj.Token)
			default:
				fmt.Fprintf(w, "  slot %d: free\n", sj.Slot)
			}
		}
	}
	if out.Held == 0 {
		return exitFree, true, nil
	}
	return 0, true, nil
}

// Statuses of a one-shot tenure status.
const (
	exitFree   = 3 // the record says released
	exitAbsent = 4 // no record
)

// statusJSON is one observation as --json prints it.
type statusJSON struct {
	Lease    string `json:"lease"`
	Found    bool   `json:"found"`
	Holder   string `json:"holder,omitempty"`
	Token    uint64 `json:"token,omitempty"`
	Payload  string `json:"payload,omitempty"`
	Addr     string `json:"addr,omitempty"` // where the holder serves (Config.Addr), while its term is known to be live
	Released bool   `json:"released"`
	// The writer's own figures.
	LeaseSeconds float64    `json:"lease_seconds,omitempty"`
	WrittenAt    *time.Time `json:"written_at,omitempty"`
	// This host's observation.
	ObservedAt time.Time `json:"observed_at"`
	// Only --watch can know these, by reading again: how long this host has
	// seen this version, and whether that is longer than its lease.
	UnchangedFor   *float64 `json:"unchanged_for_seconds,omitempty"`
	SilentHereLong *bool    `json:"silent_longer_than_lease,omitempty"`
	Error          string   `json:"error,omitempty"`
}

func printObservation(w io.Writer, o tenure.Observation, asJSON, watch bool) {
	age := o.At.Sub(o.Since)
	if asJSON {
		j := statusJSON{Lease: o.Lease, Found: o.Found, Holder: o.Holder, Token: uint64(o.Token), Payload: payloadText(o.Payload),
			Addr: o.Addr, Released: o.Released, LeaseSeconds: o.Duration.Seconds(), ObservedAt: o.At.Round(0).UTC()}
		if !o.WrittenAt.IsZero() {
			t := o.WrittenAt.UTC()
			j.WrittenAt = &t
		}
		if watch && o.Found {
			s, silent := age.Seconds(), o.Expired
			j.UnchangedFor, j.SilentHereLong = &s, &silent
		}
		if o.Err != nil {
			j.Error = o.Err.Error()
		}
		b, _ := json.Marshal(j)
		fmt.Fprintf(w, "%s\n", b)
		return
	}
	if watch {
		fmt.Fprintf(w, "%s  ", o.At.Format(time.RFC3339))
	}
	switch {
	case o.Err != nil && !o.Found && o.Since.IsZero():
		fmt.Fprintf(w, "%s: cannot read: %v\n", o.Lease, o.Err)
		return
	case !o.Found:
		fmt.Fprintf(w, "%s: no record\n", o.Lease)
	case o.Released:
		fmt.Fprintf(w, "%s: released (last token %d)", o.Lease, o.Token)
	default:
		fmt.Fprintf(w, "%s: held by %q, token %d, lease %v", o.Lease, o.Holder, o.Token, o.Duration)
		if o.Addr != "" {
			fmt.Fprintf(w, ", serving on %s", o.Addr)
		}
		if len(o.Payload) > 0 {
			fmt.Fprintf(w, ", payload %q", payloadText(o.Payload))
		}
	}
	if o.Found {
		fmt.Fprintf(w, "; written %s by the writer's clock", o.WrittenAt.UTC().Format(time.RFC3339Nano))
		if watch {
			fmt.Fprintf(w, "; unchanged for %v as observed here", age.Round(time.Millisecond))
		} else {
			fmt.Fprint(w, "; its age as this host observes it needs --watch")
		}
		if o.Expired {
			fmt.Fprint(w, "; SILENT: unchanged longer than its lease as observed here")
		}
		fmt.Fprintln(w)
	}
	if o.Err != nil {
		fmt.Fprintf(w, "  (last read failed: %v)\n", o.Err)
	}
}

// payloadText shows a payload as text when it is, else as hex.
func payloadText(p []byte) string {
	if utf8.Valid(p) {
		return string(p)
	}
	return fmt.Sprintf("%x", p)
}
