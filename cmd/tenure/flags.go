package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// envName is the environment variable that sets flag name: TENURE_ and the
// name in upper case, '-' as '_' (--metrics-addr: TENURE_METRICS_ADDR).
func envName(name string) string {
	return "TENURE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// parseFlags sets fs's flags from the environment, then from args, which
// win. It returns false, having reported the problem, on a usage error or
// -h (status 0 then).
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) (ok bool, status int) {
	var bad error
	fs.VisitAll(func(f *flag.Flag) {
		if v, set := os.LookupEnv(envName(f.Name)); set && bad == nil {
			if err := fs.Set(f.Name, v); err != nil {
				bad = fmt.Errorf("%s=%q (--%s): %w", envName(f.Name), v, f.Name, err)
			}
		}
	})
	if bad != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), bad)
		return false, exitUsage
	}
	out := fs.Output()
	fs.SetOutput(io.Discard) // the flag package would print the whole help after a one-line error
	err := fs.Parse(flagsFirst(fs, args))
	fs.SetOutput(out)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return false, 0
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v%s\nsee %s -h\n", fs.Name(), err, hint(fs, err), fs.Name())
		return false, exitUsage
	}
	return true, 0
}

// hint says what a flag's parse error most likely means.
func hint(fs *flag.FlagSet, err error) string {
	if strings.HasPrefix(err.Error(), "flag provided but not defined") && (fs.Name() == "tenure run" || fs.Name() == "tenure lock") {
		return ` (is "--" missing? the command and its flags go after it: want [flags] NAME -- COMMAND [ARGS...])`
	}
	_, rest, ok := strings.Cut(err.Error(), " for flag -")
	name, _, _ := strings.Cut(rest, ":")
	if f := fs.Lookup(name); ok && f != nil {
		if g, isGetter := f.Value.(flag.Getter); isGetter {
			if _, isDuration := g.Get().(time.Duration); isDuration {
				return " (durations need a unit: 10s, 500ms, 2m)"
			}
		}
	}
	return ""
}

// newFlagSet returns the flags of a command whose -h prints usage, the
// flags, and how the environment sets them.
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fmt.Fprintln(fs.Output(), "\nflags (each also from the environment: --store from TENURE_STORE, and so on):")
		fs.PrintDefaults()
	}
	return fs
}

// flagsFirst moves the flags of args before the other arguments, so that
// "tenure status NAME --json" reads as "tenure status --json NAME". A flag
// that takes a value takes the next argument along, unless written -f=v.
func flagsFirst(fs *flag.FlagSet, args []string) []string {
	var flags, rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' {
			rest = append(rest, a)
			continue
		}
		flags = append(flags, a)
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := fs.Lookup(name)
		if f == nil || hasValue || isBool(f) {
			continue
		}
		if i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	return append(flags, rest...)
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// isSet reports whether the flag name was given, on the command line or in
// the environment.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
