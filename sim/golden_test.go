package sim

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.txt from the code as it is now")

// goldenSeeds is how many seeds of every scenario the golden file pins.
const goldenSeeds = 4

// TestGoldenTraces runs seeds 1 to goldenSeeds of every scenario and
// compares each trace's hash with testdata/golden.txt: a refactor of the
// simulator, or of the code it runs, must leave every line as it was. A
// change meant to alter traces regenerates the file with
//
//	go test ./sim -run TestGoldenTraces -update
//
// in a commit of its own that says why.
func TestGoldenTraces(t *testing.T) {
	var got strings.Builder
	for _, sc := range Scenarios() {
		for seed := uint64(1); seed <= goldenSeeds; seed++ {
			r := Run(sc, seed, Options{})
			fmt.Fprintf(&got, "%s %d %016x %d\n", sc.Name, seed, r.Hash, r.Lines)
		}
	}
	path := filepath.Join("testdata", "golden.txt")
	if *update {
		header := "# scenario seed trace-hash trace-lines: go test ./sim -run TestGoldenTraces -update\n"
		if err := os.WriteFile(path, []byte(header+got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it with -update)", err)
	}
	want := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 4 && !strings.HasPrefix(l, "#") {
			want[f[0]+" "+f[1]] = l
		}
	}
	changed := 0
	for _, l := range strings.Split(strings.TrimSpace(got.String()), "\n") {
		f := strings.Fields(l)
		switch w, ok := want[f[0]+" "+f[1]]; {
		case !ok:
			t.Errorf("%s seed %s: not in %s (regenerate it with -update)", f[0], f[1], path)
		case w != l:
			changed++
			if changed <= 10 {
				t.Errorf("%s seed %s: trace %s (%s lines), golden %s", f[0], f[1], f[2], f[3], w)
			}
		}
	}
	if changed > 10 {
		t.Errorf("... and %d more changed traces", changed-10)
	}
}
