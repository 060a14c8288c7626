package main

import (
	"strings"
	"testing"
)

func TestRunAndLockUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "want [flags] NAME -- COMMAND"},
		{[]string{"run", "job"}, "want [flags] NAME -- COMMAND"},
		{[]string{"run", "job", "true"}, "want [flags] NAME -- COMMAND"},
		{[]string{"run", "job", "extra", "--", "true"}, `unexpected "extra"`},
		{[]string{"lock", "--", "true"}, "no lock NAME"},
		{[]string{"run", "bad name", "--", "true"}, "invalid name"},
		{[]string{"run", "--on-exit", "maybe", "job", "--", "true"}, "--on-exit"},
		{[]string{"run", "--on-lost", "x", "job", "--", "true"}, "--on-lost"},
		{[]string{"run", "--grace", "0s", "job", "--", "true"}, "--grace"},
		{[]string{"run", "--store", "redis://x", "job", "--", "true"}, "unknown scheme"},
		{[]string{"run", "--store", "mem:", "--lease", "-1s", "job", "--", "true"}, "LeaseDuration"},
		{[]string{"lock", "--wait", "soon", "job", "--", "true"}, "want 0, a duration"},
		{[]string{"lock", "--wait", "-1s", "job", "--", "true"}, "want 0, a duration"},
		{[]string{"lock", "--wait", "0", "--store", "mem:", "--payload", strings.Repeat("x", 2000), "job", "--", "true"}, "Payload is 2000 bytes"},
		{[]string{"status"}, "want one lease NAME"},
		{[]string{"status", "a", "b"}, "want one lease NAME"},
	} {
		if code, _, errs := runTenure(t, c.args...); code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, code, errs, exitUsage, c.want)
		}
	}
}

func TestHelpShowsExamples(t *testing.T) {
	for _, cmd := range []string{"run", "lock", "status", "plan"} {
		if code, _, errs := runTenure(t, cmd, "-h"); code != 0 || !strings.Contains(errs, "examples:") || !strings.Contains(errs, "TENURE_LEASE") {
			t.Errorf("%s -h: exit %d\n%s", cmd, code, errs)
		}
	}
}

func TestStatusOfAbsentLease(t *testing.T) {
	code, out, errs := runTenure(t, "status", "--store", "file://"+t.TempDir(), "nothing/here")
	if code != 0 || !strings.Contains(out, "nothing/here: no record") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = runTenure(t, "status", "--json", "--store", "file://"+t.TempDir(), "x")
	if code != 0 || !strings.Contains(out, `"found":false`) {
		t.Fatalf("--json: exit %d\n%s", code, out)
	}
}

func TestDefaultLeaseName(t *testing.T) {
	for argv0, want := range map[string]string{
		"./job.sh": "run/job.sh", "/usr/bin/backup": "run/backup", "my job!": "run/my_job_", ".hidden": "run/cmd.hidden",
	} {
		if got := defaultLeaseName([]string{argv0}); got != want {
			t.Errorf("defaultLeaseName(%q) = %q, want %q", argv0, got, want)
		}
	}
}

// TestFlagsAfterName: flags may follow NAME, as in "tenure status NAME --json".
func TestFlagsAfterName(t *testing.T) {
	dir := "file://" + t.TempDir()
	code, out, errs := runTenure(t, "status", "x", "--json", "--store", dir)
	if code != 0 || !strings.Contains(out, `"found":false`) {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	code, _, errs = runTenure(t, "lock", "job", "--wait", "0", "--store", dir, "--", "true")
	if code != 0 {
		t.Fatalf("lock NAME --wait 0 -- true: exit %d\n%s", code, errs)
	}
}

// TestUnreachableStore: a store that never answers ends run and lock with
// exitUnavailable after startupWait.
func TestUnreachableStore(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "x")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "x")
	store := "dynamodb://table?region=us-east-1&endpoint=http://127.0.0.1:1"
	for _, cmd := range []string{"run", "lock"} {
		code, _, errs := runTenure(t, cmd, "--lease", "1s", "--store", store, "job", "--", "true")
		if code != exitUnavailable || !strings.Contains(errs, "no answer from the store within 5s") {
			t.Errorf("%s: exit %d, stderr %q; want %d", cmd, code, errs, exitUnavailable)
		}
	}
}
