package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// The /metrics page, in Prometheus's text format, written here from what
// an OpenTelemetry ManualReader collects, with the names, labels and types
// that OpenTelemetry's Prometheus exporter gives them (dots as
// underscores, the unit as a suffix, _total on counters, otel_scope_*
// labels, target_info), and the Go runtime's and the process's metrics
// under the names Prometheus's Go client gives them. The exporter and the
// client bring 1.4 MB into a binary that runs beside every job; these are
// the few formats tenure's instruments use.

// writeMetrics writes rm, the runtime's and the process's metrics: one
// family per name, the families sorted by name, as Prometheus's registry
// gathers them (an instrument of one name in two scopes is one family).
func writeMetrics(w io.Writer, rm *metricdata.ResourceMetrics) error {
	p := &promWriter{families: map[string]*family{}}
	if rm.Resource != nil && rm.Resource.Len() > 0 {
		p.family("target_info", "gauge", "Target metadata")
		p.sample("target_info", labels(*rm.Resource.Set(), nil), 1)
	}
	for _, sm := range rm.ScopeMetrics {
		scope := []attribute.KeyValue{
			attribute.String("otel_scope_name", sm.Scope.Name),
			attribute.String("otel_scope_schema_url", sm.Scope.SchemaURL),
			attribute.String("otel_scope_version", sm.Scope.Version),
		}
		for _, m := range sm.Metrics {
			p.metric(m, scope)
		}
	}
	p.runtime()
	p.process()
	names := slices.Sorted(maps.Keys(p.families))
	bw := bufio.NewWriter(w)
	for _, name := range names {
		f := p.families[name]
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n", name, escapeHelp(f.help), name, f.typ)
		for _, line := range f.lines {
			bw.WriteString(line)
		}
	}
	return bw.Flush()
}

// promWriter gathers families; a sample goes to the family last named.
type promWriter struct {
	families map[string]*family
	cur      *family
}

type family struct {
	typ, help string
	lines     []string
}

func (p *promWriter) family(name, typ, help string) {
	f := p.families[name]
	if f == nil {
		f = &family{typ: typ, help: help}
		p.families[name] = f
	}
	p.cur = f
}

func (p *promWriter) sample(name, labels string, v float64) {
	if labels != "" {
		labels = "{" + labels + "}"
	}
	p.cur.lines = append(p.cur.lines, name+labels+" "+formatFloat(v)+"\n")
}

// metric writes one instrument's points.
func (p *promWriter) metric(m metricdata.Metrics, scope []attribute.KeyValue) {
	name := promName(m.Name, m.Unit)
	switch d := m.Data.(type) {
	case metricdata.Gauge[int64]:
		p.family(name, "gauge", m.Description)
		writePoints(p, name, d.DataPoints, scope)
	case metricdata.Gauge[float64]:
		p.family(name, "gauge", m.Description)
		writePoints(p, name, d.DataPoints, scope)
	case metricdata.Sum[int64]:
		name, typ := sumName(name, d.IsMonotonic)
		p.family(name, typ, m.Description)
		writePoints(p, name, d.DataPoints, scope)
	case metricdata.Sum[float64]:
		name, typ := sumName(name, d.IsMonotonic)
		p.family(name, typ, m.Description)
		writePoints(p, name, d.DataPoints, scope)
	case metricdata.Histogram[float64]:
		p.family(name, "histogram", m.Description)
		for _, dp := range d.DataPoints {
			ls := labels(dp.Attributes, scope)
			var n uint64
			for i, bound := range dp.Bounds {
				n += dp.BucketCounts[i]
				p.sample(name+"_bucket", join(ls, `le="`+formatFloat(bound)+`"`), float64(n))
			}
			p.sample(name+"_bucket", join(ls, `le="+Inf"`), float64(dp.Count))
			p.sample(name+"_sum", ls, dp.Sum)
			p.sample(name+"_count", ls, float64(dp.Count))
		}
	}
}

func writePoints[N int64 | float64](p *promWriter, name string, points []metricdata.DataPoint[N], scope []attribute.KeyValue) {
	for _, dp := range points {
		p.sample(name, labels(dp.Attributes, scope), float64(dp.Value))
	}
}

// sumName names a sum: a counter's with _total; one that may go down is a
// gauge.
func sumName(name string, monotonic bool) (string, string) {
	if !monotonic {
		return name, "gauge"
	}
	return name + "_total", "counter"
}

// promName is an instrument's name as Prometheus takes it: what is not a
// letter, digit or colon as an underscore, and the unit as a suffix (none
// for annotations in braces, such as {call}).
func promName(name, unit string) string {
	var b strings.Builder
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == ':', r >= '0' && r <= '9' && i > 0:
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	suffix := map[string]string{"s": "seconds", "ms": "milliseconds", "By": "bytes", "1": "ratio"}[unit]
	if suffix != "" && !strings.HasSuffix(b.String(), "_"+suffix) {
		b.WriteString("_" + suffix)
	}
	return b.String()
}

// labels writes a set of attributes and the scope's as labels, sorted by
// name, as the exporter does.
func labels(set attribute.Set, scope []attribute.KeyValue) string {
	kvs := append(set.ToSlice(), scope...)
	slices.SortStableFunc(kvs, func(a, b attribute.KeyValue) int { return strings.Compare(labelName(a.Key), labelName(b.Key)) })
	parts := make([]string, len(kvs))
	for i, kv := range kvs {
		parts[i] = labelName(kv.Key) + `="` + escapeLabel(kv.Value.String()) + `"`
	}
	return strings.Join(parts, ",")
}

func labelName(k attribute.Key) string {
	b := []byte(k)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= '0' && c <= '9' && i > 0) {
			b[i] = '_'
		}
	}
	return string(b)
}

func join(labels, more string) string {
	if labels == "" {
		return more
	}
	return labels + "," + more
}

func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(s)
}

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// runtime writes the Go runtime's metrics, named as Prometheus's Go client
// names them.
func (p *promWriter) runtime() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rm := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(rm)
	threads, _ := runtime.ThreadCreateProfile(nil)
	var gc debug.GCStats
	gc.PauseQuantiles = make([]time.Duration, 5)
	debug.ReadGCStats(&gc)
	p.family("go_gc_duration_seconds", "summary", "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.")
	for i, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
		p.sample("go_gc_duration_seconds", `quantile="`+q+`"`, gc.PauseQuantiles[i].Seconds())
	}
	p.sample("go_gc_duration_seconds_sum", "", gc.PauseTotal.Seconds())
	p.sample("go_gc_duration_seconds_count", "", float64(gc.NumGC))
	for _, g := range []struct {
		name, typ, help string
		v               float64
	}{
		{"go_gc_gogc_percent", "gauge", "Heap size target percentage configured by the user, otherwise 100.", float64(rm[0].Value.Uint64())},
		{"go_gc_gomemlimit_bytes", "gauge", "Go runtime memory limit configured by the user, otherwise math.MaxInt64.", float64(rm[1].Value.Uint64())},
		{"go_goroutines", "gauge", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine())},
		{"go_threads", "gauge", "Number of OS threads created.", float64(threads)},
		{"go_memstats_alloc_bytes", "gauge", "Number of bytes allocated in heap and currently in use.", float64(ms.Alloc)},
		{"go_memstats_alloc_bytes_total", "counter", "Total number of bytes allocated in heap until now, even if released already.", float64(ms.TotalAlloc)},
		{"go_memstats_buck_hash_sys_bytes", "gauge", "Number of bytes used by the profiling bucket hash table.", float64(ms.BuckHashSys)},
		{"go_memstats_frees_total", "counter", "Total number of heap objects frees.", float64(ms.Frees)},
		{"go_memstats_gc_sys_bytes", "gauge", "Number of bytes used for garbage collection system metadata.", float64(ms.GCSys)},
		{"go_memstats_heap_alloc_bytes", "gauge", "Number of heap bytes allocated and currently in use.", float64(ms.HeapAlloc)},
		{"go_memstats_heap_idle_bytes", "gauge", "Number of heap bytes waiting to be used.", float64(ms.HeapIdle)},
		{"go_memstats_heap_inuse_bytes", "gauge", "Number of heap bytes that are in use.", float64(ms.HeapInuse)},
		{"go_memstats_heap_objects", "gauge", "Number of currently allocated objects.", float64(ms.HeapObjects)},
		{"go_memstats_heap_released_bytes", "gauge", "Number of heap bytes released to OS.", float64(ms.HeapReleased)},
		{"go_memstats_heap_sys_bytes", "gauge", "Number of heap bytes obtained from system.", float64(ms.HeapSys)},
		{"go_memstats_last_gc_time_seconds", "gauge", "Number of seconds since 1970 of last garbage collection.", float64(ms.LastGC) / 1e9},
		{"go_memstats_mallocs_total", "counter", "Total number of heap objects allocated.", float64(ms.Mallocs)},
		{"go_memstats_mcache_inuse_bytes", "gauge", "Number of bytes in use by mcache structures.", float64(ms.MCacheInuse)},
		{"go_memstats_mcache_sys_bytes", "gauge", "Number of bytes used for mcache structures obtained from system.", float64(ms.MCacheSys)},
		{"go_memstats_mspan_inuse_bytes", "gauge", "Number of bytes in use by mspan structures.", float64(ms.MSpanInuse)},
		{"go_memstats_mspan_sys_bytes", "gauge", "Number of bytes used for mspan structures obtained from system.", float64(ms.MSpanSys)},
		{"go_memstats_next_gc_bytes", "gauge", "Number of heap bytes when next garbage collection will take place.", float64(ms.NextGC)},
		{"go_memstats_other_sys_bytes", "gauge", "Number of bytes used for other system allocations.", float64(ms.OtherSys)},
		{"go_memstats_stack_inuse_bytes", "gauge", "Number of bytes obtained from system for stack allocator in non-CGO environments.", float64(ms.StackInuse)},
		{"go_memstats_stack_sys_bytes", "gauge", "Number of bytes obtained from system for stack allocator.", float64(ms.StackSys)},
		{"go_memstats_sys_bytes", "gauge", "Number of bytes obtained from system.", float64(ms.Sys)},
		{"go_sched_gomaxprocs_threads", "gauge", "The current runtime.GOMAXPROCS setting.", float64(runtime.GOMAXPROCS(0))},
	} {
		p.family(g.name, g.typ, g.help)
		p.sample(g.name, "", g.v)
	}
	p.family("go_info", "gauge", "Information about the Go environment.")
	p.sample("go_info", `version="`+runtime.Version()+`"`, 1)
}

// process writes the process's metrics, from /proc (Linux; elsewhere none),
// named as Prometheus's Go client names them.
func (p *promWriter) process() {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return
	}
	// The fields after the command, which is in parentheses and may hold
	// spaces: state is field 3 of proc(5).
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	num := func(i int) float64 { // field i of proc(5)
		if i-3 >= len(f) {
			return 0
		}
		v, _ := strconv.ParseFloat(f[i-3], 64)
		return v
	}
	const tick = 100 // USER_HZ on Linux
	page := float64(os.Getpagesize())
	fds, _ := os.ReadDir("/proc/self/fd")
	g := []struct {
		name, typ, help string
		v               float64
	}{
		{"process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", (num(14) + num(15)) / tick},
		{"process_open_fds", "gauge", "Number of open file descriptors.", float64(len(fds))},
		{"process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", num(24) * page},
		{"process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", num(23)},
	}
	if boot := bootTime(); boot > 0 {
		g = append(g, struct {
			name, typ, help string
			v               float64
		}{"process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.", boot + num(22)/tick})
	}
	if limit := limit("Max open files"); limit > 0 {
		g = append(g, struct {
			name, typ, help string
			v               float64
		}{"process_max_fds", "gauge", "Maximum number of open file descriptors.", limit})
	}
	if limit := limit("Max address space"); limit != 0 {
		g = append(g, struct {
			name, typ, help string
			v               float64
		}{"process_virtual_memory_max_bytes", "gauge", "Maximum amount of virtual memory available in bytes.", limit})
	}
	if rx, tx, ok := netBytes(); ok {
		g = append(g, []struct {
			name, typ, help string
			v               float64
		}{
			{"process_network_receive_bytes_total", "counter", "Number of bytes received by the process over the network.", rx},
			{"process_network_transmit_bytes_total", "counter", "Number of bytes sent by the process over the network.", tx},
		}...)
	}
	for _, m := range g {
		p.family(m.name, m.typ, m.help)
		p.sample(m.name, "", m.v)
	}
}

// bootTime is the system's boot time in Unix seconds, or 0.
func bootTime() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return n
		}
	}
	return 0
}

// limit is the soft limit of /proc/self/limits named name: MaxUint64 for
// unlimited, 0 if none is found.
func limit(name string) float64 {
	b, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, name); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				if f[0] == "unlimited" {
					return math.MaxUint64 // as Prometheus's Go client says it
				}
				n, _ := strconv.ParseFloat(f[0], 64)
				return n
			}
		}
	}
	return 0
}

// netBytes sums the bytes received and sent on every interface of the
// process's network namespace (/proc/self/net/dev).
func netBytes() (rx, tx float64, ok bool) {
	b, err := os.ReadFile("/proc/self/net/dev")
	if err != nil {
		return 0, 0, false
	}
	for line := range strings.Lines(string(b)) {
		_, counts, found := strings.Cut(line, ":")
		f := strings.Fields(counts)
		if !found || len(f) < 9 {
			continue
		}
		r, _ := strconv.ParseFloat(f[0], 64)
		t, _ := strconv.ParseFloat(f[8], 64)
		rx, tx = rx+r, tx+t
	}
	return rx, tx, true
}

// collect writes what r collects now.
func collect(ctx context.Context, r *sdkmetric.ManualReader, w io.Writer) error {
	var rm metricdata.ResourceMetrics
	if err := r.Collect(ctx, &rm); err != nil {
		return err
	}
	return writeMetrics(w, &rm)
}
