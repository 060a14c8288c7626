package tenure_test

import (
	"context"
	"testing"
	"testing/synctest"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tenure-go/tenure"
)

// collect returns the data points of every instrument by name.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

func gauge(a metricdata.Aggregation) int64 {
	g, ok := a.(metricdata.Gauge[int64])
	if !ok || len(g.DataPoints) != 1 {
		return -1
	}
	return g.DataPoints[0].Value
}

func sum(a metricdata.Aggregation) int64 {
	s, _ := a.(metricdata.Sum[int64])
	var n int64
	for _, p := range s.DataPoints {
		n += p.Value
	}
	return n
}

// TestCandidateMetrics: a term, a record written back under the leader
// (an anomaly and a demotion), the gauges, and the store calls, as a
// MeterProvider sees them.
func TestCandidateMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		w := newWorld(t)
		a := w.start("a", nil, func(c *tenure.Config) { c.MeterProvider = mp })
		synctest.Wait()
		m := collect(t, reader)
		if gauge(m["tenure.leader"]) != 1 || gauge(m["tenure.token"]) != int64(tok(1)) || sum(m["tenure.terms"]) != 1 {
			t.Fatalf("leading: leader %d, token %d, terms %d", gauge(m["tenure.leader"]), gauge(m["tenure.token"]), sum(m["tenure.terms"]))
		}
		if sum(m["tenure.store.calls"]) < 2 || m["tenure.store.duration"] == nil {
			t.Fatalf("store calls %d, duration %v", sum(m["tenure.store.calls"]), m["tenure.store.duration"])
		}
		// A restored backup: the record goes back to a lower token.
		rec, ver, err := w.store.Get(context.Background(), leaseName)
		if err != nil {
			t.Fatal(err)
		}
		rec.Token--
		rec.Holder = "old"
		if _, err := w.store.Put(context.Background(), leaseName, rec, ver); err != nil {
			t.Fatal(err)
		}
		wait(3e9)
		m = collect(t, reader)
		if gauge(m["tenure.leader"]) != 0 || sum(m["tenure.demotions"]) != 1 || sum(m["tenure.anomalies"]) < 1 {
			t.Fatalf("after the write-back: leader %d, demotions %d, anomalies %d", gauge(m["tenure.leader"]), sum(m["tenure.demotions"]), sum(m["tenure.anomalies"]))
		}
		d := m["tenure.demotions"].(metricdata.Sum[int64]).DataPoints[0]
		if r, _ := d.Attributes.Value("reason"); r.AsString() != tenure.ReasonRecordLost.String() {
			t.Fatalf("demotion reason %v", r.AsString())
		}
		if err := a.stop(); err != nil {
			t.Fatal(err)
		}
		if _, ok := collect(t, reader)["tenure.leader"]; ok {
			t.Fatal("the gauges outlived Run")
		}
	})
}

func TestLockerMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		l, err := tenure.NewLocker(tenure.LockerConfig{Store: newWorld(t).store, Runtime: tenure.Runtime{ID: "l", MeterProvider: mp}})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		for _, name := range []string{"a", "b"} {
			if _, err := l.TryLock(context.Background(), name); err != nil {
				t.Fatal(err)
			}
		}
		m := collect(t, reader)
		if gauge(m["tenure.locks.held"]) != 2 || sum(m["tenure.terms"]) != 2 || sum(m["tenure.store.calls"]) < 4 {
			t.Fatalf("held %d, terms %d, calls %d", gauge(m["tenure.locks.held"]), sum(m["tenure.terms"]), sum(m["tenure.store.calls"]))
		}
	})
}
