package sim

import (
	"bytes"
	"strings"
	"testing"
)

func TestTimelineSVG(t *testing.T) {
	r := Run(Lookup("gc-pause"), 1, Options{Timeline: true})
	var b bytes.Buffer
	if err := r.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	for _, s := range []string{"<svg", "gc-pause, seed 1", "paused", "write refused", "wall ", "I1", "</svg>"} {
		if !strings.Contains(svg, s) {
			t.Errorf("SVG lacks %q", s)
		}
	}
	if err := Run(Lookup("gc-pause"), 1, Options{}).WriteSVG(&b); err != ErrNoTimeline {
		t.Fatalf("without a timeline: %v", err)
	}
}
