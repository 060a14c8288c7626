package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/lease/filelease"
)

func scrape(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMetricsEndpoint scrapes /metrics as the CLI serves it, around a term,
// a lost record (its file deleted) and the next term, and finds each
// instrument; /healthz answers for the Candidate.
func TestMetricsEndpoint(t *testing.T) {
	tel, err := newTelemetry("127.0.0.1:0", "tenure-test", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer tel.close()
	dir := t.TempDir()
	store, _ := filelease.New(dir)
	terms := make(chan tenure.Term, 4)
	c, err := tenure.New(tenure.Config{Lease: "job", Store: store, Runtime: tenure.Runtime{ID: "a", MeterProvider: tel.mp}, Timing: tenure.Timing{LeaseDuration: time.Second},
		Callbacks: tenure.Callbacks{OnElected: func(_ context.Context, t tenure.Term) { terms <- t }}})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := scrape(t, "http://"+tel.addr()+"/readyz"); code != 503 {
		t.Fatalf("/readyz before the handler: %d", code)
	}
	if code, _ := scrape(t, "http://"+tel.addr()+"/livez"); code != 200 {
		t.Fatalf("/livez before the handler: %d", code)
	}
	tel.setProbes(c.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	next := func(what string) tenure.Term {
		t.Helper()
		select {
		case term := <-terms:
			return term
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s within 10s", what)
			return tenure.Term{}
		}
	}
	first := next("term")
	if err := os.RemoveAll(filepath.Join(dir, "job.lease")); err != nil {
		t.Fatal(err)
	}
	second := next("term after the lost record")
	if second.Token <= first.Token {
		t.Fatalf("token %d after %d", second.Token, first.Token)
	}
	_, body := scrape(t, "http://"+tel.addr()+"/metrics")
	for _, want := range []string{
		`tenure_leader{lease="job"`, `tenure_token{lease="job"`, `tenure_terms_total{lease="job"`,
		`tenure_demotions_total{lease="job",`, `reason="lease record lost"`, `tenure_anomalies_total{lease="job"`,
		`tenure_store_calls_total{lease="job",`, `outcome="ok"`, `tenure_store_duration_seconds_bucket{lease="job",`,
		fmt.Sprintf(`token="%d"`, second.Token), "go_goroutines", "process_open_fds", `service_name="tenure-test"`,
		"tenure_child_running", "tenure_child_exit_status",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
	for _, p := range []string{"/livez", "/readyz", "/leader", "/healthz"} {
		if code, body := scrape(t, "http://"+tel.addr()+p); code != 200 || !strings.Contains(body, `"leading":true`) || strings.Contains(body, "payload") {
			t.Errorf("%s: %d %s", p, code, body)
		}
	}
	for _, p := range []string{"/", "/nothing", "/livez/x"} {
		if code, _ := scrape(t, "http://"+tel.addr()+p); code != 404 {
			t.Errorf("%s: %d, want 404", p, code)
		}
	}
}

// TestNoListenerByDefault: without --metrics-addr nothing listens.
func TestNoListenerByDefault(t *testing.T) {
	tel, err := newTelemetry("", "tenure", io.Discard)
	if err != nil || tel.addr() != "" || tel.srv != nil {
		t.Fatalf("%v %q", err, tel.addr())
	}
	tel.close()
}

// TestMetricsText: the page names, labels and types instruments as
// OpenTelemetry's Prometheus exporter did (dots as underscores, the unit
// as a suffix, _total on counters, the scope's labels, target_info), so
// that dashboards built on it keep working.
func TestMetricsText(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	res := resource.NewSchemaless(attribute.String("service.name", "svc"))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(res))
	m := mp.Meter("example/scope")
	ctx := context.Background()
	calls, _ := m.Int64Counter("tenure.store.calls", metric.WithDescription("Store calls."), metric.WithUnit("{call}"))
	calls.Add(ctx, 3, metric.WithAttributes(attribute.String("op", "get"), attribute.String("lease", "job")))
	jeopardy, _ := m.Int64UpDownCounter("tenure.jeopardy", metric.WithDescription("Held terms \"in\" jeopardy."), metric.WithUnit("{term}"))
	jeopardy.Add(ctx, -1)
	dur, _ := m.Float64Histogram("tenure.store.duration", metric.WithDescription("Duration."), metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(0.01, 0.1))
	dur.Record(ctx, 0.05)
	dur.Record(ctx, 0.5)
	var b strings.Builder
	if err := collect(ctx, reader, &b); err != nil {
		t.Fatal(err)
	}
	scope := `otel_scope_name="example/scope",otel_scope_schema_url="",otel_scope_version=""`
	want := `# HELP tenure_jeopardy Held terms "in" jeopardy.
# TYPE tenure_jeopardy gauge
tenure_jeopardy{` + scope + `} -1
# HELP tenure_store_calls_total Store calls.
# TYPE tenure_store_calls_total counter
tenure_store_calls_total{lease="job",op="get",` + scope + `} 3
# HELP tenure_store_duration_seconds Duration.
# TYPE tenure_store_duration_seconds histogram
tenure_store_duration_seconds_bucket{` + scope + `,le="0.01"} 0
tenure_store_duration_seconds_bucket{` + scope + `,le="0.1"} 1
tenure_store_duration_seconds_bucket{` + scope + `,le="+Inf"} 2
tenure_store_duration_seconds_sum{` + scope + `} 0.55
tenure_store_duration_seconds_count{` + scope + `} 2
`
	if !strings.Contains(b.String(), "# TYPE target_info gauge\ntarget_info{service_name=\"svc\"} 1\n") {
		t.Errorf("no target_info naming the service:\n%s", b.String())
	}
	if got := b.String(); !strings.HasSuffix(got, want) {
		t.Errorf("got:\n%s\nwant it to end with the tenure families, sorted:\n%s", got, want)
	}
	for _, name := range []string{"go_goroutines ", "go_gc_duration_seconds_count ", "go_info{version=", "process_open_fds ", "process_resident_memory_bytes "} {
		if !strings.Contains(b.String(), "\n"+name) {
			t.Errorf("no %s", name)
		}
	}
}
