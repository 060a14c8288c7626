package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runTenure(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestSimPasses(t *testing.T) {
	code, out, errs := runTenure(t, "sim", "-scenario", "leader-crash", "-seeds", "3")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, s := range []string{"scenario", "runs", "I1", "I6", "simulated", "wall", "leader-crash", "tenure, fenced resource: 3 runs"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
}

// TestSimScenarioList: -scenario takes several names, each run once.
func TestSimScenarioList(t *testing.T) {
	code, out, errs := runTenure(t, "sim", "-scenario", "leader-crash,gc-pause,leader-crash", "-seeds", "2")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, s := range []string{"leader-crash", "gc-pause", "tenure, fenced resource: 4 runs"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
}

// TestSimCPUProfile: -cpuprofile writes a profile (gzipped, as pprof's are).
func TestSimCPUProfile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cpu.pgo")
	if code, out, errs := runTenure(t, "sim", "-scenario", "leader-crash", "-seeds", "20", "-cpuprofile", p); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 100 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("the profile is %d bytes, starting % x: not a gzipped pprof profile", len(b), b[:min(len(b), 2)])
	}
}

// TestSimNaiveFails: the baseline fails where the issue says it must, and
// every failing seed comes with the command that replays it.
func TestSimNaiveFails(t *testing.T) {
	for _, name := range []string{"constant-skew", "ntp-step"} {
		code, out, _ := runTenure(t, "sim", "-scenario", name, "-seeds", "2", "-strategy", "naive")
		if code != 1 {
			t.Fatalf("%s: exit %d, want 1\n%s", name, code, out)
		}
		for _, s := range []string{
			"FAIL: 2 runs broke promised invariants, in " + name,
			name + " seed 1: I1 (one leader)",
			"replay: go run ./cmd/tenure sim -scenario " + name + " -seed 2 -strategy naive -trace",
		} {
			if !strings.Contains(out, s) {
				t.Errorf("output lacks %q:\n%s", s, out)
			}
		}
	}
}

func TestSimUnfencedFails(t *testing.T) {
	code, out, _ := runTenure(t, "sim", "-scenario", "gc-pause", "-resource", "unfenced")
	if code != 1 || !strings.Contains(out, "I3 (fencing)") || !strings.Contains(out, "-resource unfenced") {
		t.Fatalf("exit %d, want 1 with an I3 failure\n%s", code, out)
	}
}

// TestSimTraceReplays: the check, two runs print the same output.
func TestSimTraceReplays(t *testing.T) {
	_, a, summary := runTenure(t, "sim", "-scenario", "swarm", "-seed", "7", "-trace")
	_, b, _ := runTenure(t, "sim", "-scenario", "swarm", "-seed", "7", "-trace")
	if a != b || strings.Count(a, "\n") < 100 {
		t.Fatalf("outputs differ or are short (%d and %d lines)", strings.Count(a, "\n"), strings.Count(b, "\n"))
	}
	if !strings.Contains(summary, "swarm") || strings.Contains(a, "scenario  runs") {
		t.Fatalf("the summary belongs on stderr with -trace:\n%s", summary)
	}
}

func TestSimSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.svg")
	if code, out, errs := runTenure(t, "sim", "-scenario", "gc-pause", "-svg", path); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	b, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(b, []byte("<svg")) {
		t.Fatalf("SVG: %v, %.40q", err, b)
	}
}

func TestSimUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"nope"},
		{"sim", "-scenario", "nope"},
		{"sim", "-scenario", "leader-crash,nope"},
		{"sim", "-scenario", "leader-crash,gc-pause", "-svg", "x.svg"},
		{"sim", "-strategy", "clever"},
		{"sim", "-resource", "fenceless"},
		{"sim", "-seeds", "0"},
		{"sim", "-svg", "x.svg"}, // all scenarios: more than one run
		{"sim", "extra"},
	} {
		if code, _, errs := runTenure(t, args...); code != 2 || errs == "" {
			t.Errorf("%q: exit %d, stderr %q; want 2 with a message", args, code, errs)
		}
	}
	if code, _, errs := runTenure(t, "sim", "-h"); code != 0 || !strings.Contains(errs, "drift-beyond-bound") || !strings.Contains(errs, "examples:") {
		t.Errorf("-h: exit %d, want 0 and the usage listing the scenarios:\n%s", code, errs)
	}
}
