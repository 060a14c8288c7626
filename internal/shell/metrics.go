package shell

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
)

// Metrics. A Candidate and a Locker report through the OpenTelemetry
// MeterProvider of their configuration (the global one by default, which
// records nothing until a program installs an SDK):
//
//	tenure.leader                gauge     1 while the Candidate leads, else 0       lease
//	tenure.token                 gauge     the token of the current term, 0 outside   lease
//	tenure.term                  gauge     1 while leading                           lease, token
//	tenure.terms                 counter   terms begun                               lease
//	tenure.demotions             counter   terms ended                               lease, reason
//	tenure.anomalies             counter   a lost or invalid record, a duplicate ID   lease
//	tenure.store.calls           counter   store calls                               lease, op, outcome
//	tenure.store.duration        histogram seconds per store call                    lease, op, outcome
//	tenure.locks.held            gauge     locks a Locker holds                      locker
//
// tenure.token is an integer instrument, but Prometheus keeps every value
// as a float and prints large ones in exponent form (1.795533564291e+12,
// exact below 2^53); tenure.term carries the token as a decimal attribute,
// for exact matching and display.
//
// For a Locker, lease is "locker": lock names would make a series each.
// op is get or put; outcome is ok, conflict, not_found, timeout, abandoned,
// permanent or error.

const meterName = "github.com/tenure-go/tenure"

// Metrics are the instruments of a Candidate, a Locker or a Group.
type Metrics struct {
	terms, demotions, anomalies, calls metric.Int64Counter
	jeopardy                           metric.Int64UpDownCounter
	duration                           metric.Float64Histogram
	Base                               attribute.KeyValue
	Opts                               metric.MeasurementOption // Base alone
	// callOpts are the attributes of a store call, by op (get, put) and
	// outcome: made once, since a set is built and sorted at every use of
	// metric.WithAttributes, at every renewal and poll.
	callOpts [2][len(outcomes)]metric.MeasurementOption
}

// NewMetrics makes the instruments on mp (the global MeterProvider if
// nil), each measured with base.
func NewMetrics(mp metric.MeterProvider, base attribute.KeyValue) (*Metrics, metric.Meter, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(meterName)
	ms := &Metrics{Base: base, Opts: metric.WithAttributes(base)}
	for op, name := range [...]string{"get", "put"} {
		for o, oc := range outcomes {
			ms.callOpts[op][o] = metric.WithAttributeSet(attribute.NewSet(base, attribute.String("op", name), attribute.String("outcome", oc)))
		}
	}
	var err, e error
	ms.terms, e = m.Int64Counter("tenure.terms", metric.WithDescription("Terms begun."), metric.WithUnit("{term}"))
	err = errors.Join(err, e)
	ms.demotions, e = m.Int64Counter("tenure.demotions", metric.WithDescription("Terms ended, by reason."), metric.WithUnit("{term}"))
	err = errors.Join(err, e)
	ms.anomalies, e = m.Int64Counter("tenure.anomalies", metric.WithDescription("Lost or invalid records, and duplicate IDs, seen in the store."), metric.WithUnit("{event}"))
	err = errors.Join(err, e)
	ms.jeopardy, e = m.Int64UpDownCounter("tenure.jeopardy", metric.WithDescription("Held terms whose renewals are failing: each ends at its deadline unless one lands."), metric.WithUnit("{term}"))
	err = errors.Join(err, e)
	ms.calls, e = m.Int64Counter("tenure.store.calls", metric.WithDescription("Store calls, by operation and outcome."), metric.WithUnit("{call}"))
	err = errors.Join(err, e)
	ms.duration, e = m.Float64Histogram("tenure.store.duration", metric.WithDescription("Duration of store calls."), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
	err = errors.Join(err, e)
	return ms, m, err
}

// StoreCall records one call: its kind, its error, how long it took.
func (ms *Metrics) StoreCall(kind election.OpKind, err error, d time.Duration) {
	op := 0
	if kind == election.OpPut {
		op = 1
	}
	o := ms.callOpts[op][outcome(err)]
	ms.calls.Add(context.Background(), 1, o)
	ms.duration.Record(context.Background(), d.Seconds(), o)
}

// outcomes are the values of the outcome attribute.
var outcomes = [...]string{"ok", "conflict", "not_found", "permanent", "timeout", "abandoned", "error"}

// outcome returns the index in outcomes of err's.
func outcome(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, lease.ErrConflict):
		return 1
	case errors.Is(err, lease.ErrNotFound):
		return 2
	case errors.Is(err, lease.ErrPermanent):
		return 3
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, election.ErrTimeout):
		return 4
	case errors.Is(err, context.Canceled):
		return 5
	}
	return 6
}

// Elected, Demoted, Jeopardized and Anomaly make Metrics an engine.Meter.
func (ms *Metrics) Elected() { ms.terms.Add(context.Background(), 1, ms.Opts) }

func (ms *Metrics) Demoted(r election.Reason) {
	ms.demotions.Add(context.Background(), 1, metric.WithAttributes(ms.Base, attribute.String("reason", r.String())))
}

func (ms *Metrics) Jeopardized(delta int64) { ms.jeopardy.Add(context.Background(), delta, ms.Opts) }

func (ms *Metrics) Anomaly() { ms.anomalies.Add(context.Background(), 1, ms.Opts) }
