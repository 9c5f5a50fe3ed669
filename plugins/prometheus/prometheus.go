// Package prometheus registers the `kinesis_prometheus` metrics exporter:
// every Benthos metric (the pipeline's and this project's kinesis_* metrics)
// is served as Prometheus text at the Benthos HTTP server's `/metrics`
// endpoint. Benthos core ships no Prometheus exporter, so a binary built from
// core alone cannot be scraped; importing this package fixes that.
//
//	import _ "github.com/connect-kinesis/connect-kinesis/plugins/prometheus"
//
// Benthos' registry silently replaces an exporter registered under a name
// already taken, and Redpanda Connect has a `prometheus` exporter of its own,
// so this package does not claim that name. A binary without Connect's can
// call RegisterAsPrometheus to serve this exporter as `prometheus` too, as
// connect-kinesis does.
package prometheus

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/metricsdoc"
)

const (
	fieldPrefix          = "prefix"
	fieldUseHistogram    = "use_histogram_timing"
	fieldHistogramBucket = "histogram_buckets"
	fieldAddGoMetrics    = "add_go_metrics"
	fieldAddProcMetrics  = "add_process_metrics"
)

func spec() *service.ConfigSpec {
	return service.NewConfigSpec().
		Stable().
		Summary("Serves metrics in the Prometheus text format at the HTTP server's `/metrics` endpoint.").
		Description(`
Timers (Benthos names them `+"`*_ns`"+`) are exported in seconds, with the `+"`_ns`"+` suffix replaced by `+"`_seconds`"+`, as summaries (quantiles 0.5, 0.9, 0.99) or, with `+"`use_histogram_timing`"+`, as histograms. Names and label keys are made valid Prometheus names by replacing any other character with an underscore.

The endpoint is served by the Benthos HTTP server (`+"`http.address`"+`, default `+"`0.0.0.0:4195`"+`).

### Name

In the `+"`connect-kinesis`"+` binary this exporter is also `+"`prometheus`"+`. Its own name, `+"`kinesis_prometheus`"+`, is the one to use in a binary that also has Redpanda Connect's `+"`prometheus`"+` exporter: Benthos keeps one exporter per name, and this package never takes the name `+"`prometheus`"+` from another. Either exporter serves the `+"`kinesis_*`"+` metrics, as they are plain Benthos metrics; this one adds their descriptions as HELP text.`).
		Fields(
			service.NewStringField(fieldPrefix).
				Description("A prefix added to every metric name, e.g. `myapp` gives `myapp_input_received`.").
				Default(""),
			service.NewBoolField(fieldUseHistogram).
				Description("Export timers as histograms instead of summaries. Histograms can be aggregated across instances.").
				Default(false).Advanced(),
			service.NewFloatListField(fieldHistogramBucket).
				Description("Bucket upper bounds in seconds for timers exported as histograms. Empty uses Prometheus' default buckets.").
				Default([]any{}).Advanced(),
			service.NewBoolField(fieldAddGoMetrics).
				Description("Also export Go runtime metrics (`go_*`).").
				Default(true).Advanced(),
			service.NewBoolField(fieldAddProcMetrics).
				Description("Also export process metrics (`process_*`: CPU, memory, file descriptors).").
				Default(true).Advanced(),
		).
		Example("Scrape with Prometheus", "Serve metrics at `http://localhost:4195/metrics`.", `
http:
  address: 0.0.0.0:4195
metrics:
  kinesis_prometheus: {}
`)
}

// Name is the exporter's own name, unique among Benthos plugins.
const Name = "kinesis_prometheus"

// PrometheusName is the usual name of a Prometheus exporter, claimed only by
// RegisterAsPrometheus.
const PrometheusName = "prometheus"

func init() {
	if err := register(service.GlobalEnvironment(), Name); err != nil {
		panic(err)
	}
}

func register(env *service.Environment, name string) error {
	return env.RegisterMetricsExporter(name, spec(),
		func(conf *service.ParsedConfig, log *service.Logger) (service.MetricsExporter, error) {
			return newExporterFromParsed(conf, log)
		})
}

// RegisterAsPrometheus registers this exporter in env under the name
// `prometheus` as well, unless env already has a metrics exporter of that
// name (Redpanda Connect's), which it leaves in place. It reports whether it
// registered. Call it from main, after every package's init has run.
func RegisterAsPrometheus(env *service.Environment) (bool, error) {
	if hasMetricsExporter(env, PrometheusName) {
		return false, nil
	}
	return true, register(env, PrometheusName)
}

// hasMetricsExporter reports whether env knows a metrics exporter by name.
// In Benthos v4.60.0 Environment.WalkMetrics and GetMetricsConfig read the
// global registry whatever the environment, so the environment's own linter
// is asked instead: it reports an unknown exporter as a component type it
// cannot infer.
func hasMetricsExporter(env *service.Environment, name string) bool {
	lints, err := env.NewComponentConfigLinter().LintMetricsYAML([]byte(name + ": {}"))
	if err != nil {
		return false
	}
	for _, l := range lints {
		if strings.Contains(l.What, "unable to infer") {
			return false
		}
	}
	return true
}

// Exporter implements service.MetricsExporter on a Prometheus registry.
type Exporter struct {
	prefix       string
	useHistogram bool
	buckets      []float64
	log          *service.Logger
	reg          *prometheus.Registry

	mu         sync.Mutex
	collectors map[string]prometheus.Collector
}

func newExporterFromParsed(conf *service.ParsedConfig, log *service.Logger) (*Exporter, error) {
	prefix, err := conf.FieldString(fieldPrefix)
	if err != nil {
		return nil, err
	}
	useHist, err := conf.FieldBool(fieldUseHistogram)
	if err != nil {
		return nil, err
	}
	buckets, err := conf.FieldFloatList(fieldHistogramBucket)
	if err != nil {
		return nil, err
	}
	goMetrics, err := conf.FieldBool(fieldAddGoMetrics)
	if err != nil {
		return nil, err
	}
	procMetrics, err := conf.FieldBool(fieldAddProcMetrics)
	if err != nil {
		return nil, err
	}
	for i := 1; i < len(buckets); i++ {
		if buckets[i] <= buckets[i-1] {
			return nil, fmt.Errorf("field %s: buckets must be strictly increasing, got %v then %v", fieldHistogramBucket, buckets[i-1], buckets[i])
		}
	}
	if prefix != "" && sanitize(prefix) != prefix {
		return nil, fmt.Errorf("field %s: %q is not a valid Prometheus name prefix; use letters, digits and underscores, not starting with a digit", fieldPrefix, prefix)
	}
	e := &Exporter{
		prefix:       prefix,
		useHistogram: useHist,
		buckets:      buckets,
		log:          log,
		reg:          prometheus.NewRegistry(),
		collectors:   map[string]prometheus.Collector{},
	}
	if goMetrics {
		e.reg.MustRegister(collectors.NewGoCollector())
	}
	if procMetrics {
		e.reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return e, nil
}

// HandlerFunc serves the registry; Benthos mounts it at /metrics.
func (e *Exporter) HandlerFunc() http.HandlerFunc {
	return promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{ErrorLog: nil}).ServeHTTP
}

// Close has nothing to release: the registry lives as long as the process.
func (e *Exporter) Close(context.Context) error { return nil }

func (e *Exporter) name(n string) string {
	n = sanitize(n)
	if e.prefix != "" {
		n = e.prefix + "_" + n
	}
	return n
}

// register returns the collector already registered under name, or registers
// c. Benthos asks for the same metric once per component, so a second call
// with the same name and labels shares the first collector; a call with the
// same name but other labels cannot be served and gets nil.
func (e *Exporter) register(name string, labels []string, c prometheus.Collector) prometheus.Collector {
	e.mu.Lock()
	defer e.mu.Unlock()
	if existing, ok := e.collectors[name]; ok {
		return existing
	}
	if err := e.reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return are.ExistingCollector
		}
		if e.log != nil {
			e.log.With("metric", name, "labels", strings.Join(labels, ",")).Warnf("Metric not exported: %v", err)
		}
		return nil
	}
	e.collectors[name] = c
	return c
}

func sanitizeAll(in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = sanitize(s)
	}
	return out
}

// NewCounterCtor implements service.MetricsExporter.
func (e *Exporter) NewCounterCtor(name string, labelKeys ...string) service.MetricsExporterCounterCtor {
	name = e.name(name)
	labels := sanitizeAll(labelKeys)
	vec, ok := e.register(name, labels, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: name, Help: e.help(name, "counter"),
	}, labels)).(*prometheus.CounterVec)
	return func(labelValues ...string) service.MetricsExporterCounter {
		if !ok {
			return noop{}
		}
		c, err := vec.GetMetricWithLabelValues(labelValues...)
		if err != nil {
			return noop{}
		}
		return counter{c}
	}
}

// NewTimerCtor implements service.MetricsExporter.
func (e *Exporter) NewTimerCtor(name string, labelKeys ...string) service.MetricsExporterTimerCtor {
	name = e.name(strings.TrimSuffix(name, "_ns") + "_seconds")
	labels := sanitizeAll(labelKeys)
	var vec interface {
		GetMetricWithLabelValues(...string) (prometheus.Observer, error)
	}
	if e.useHistogram {
		if h, ok := e.register(name, labels, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: name, Help: e.help(name, "timer"), Buckets: e.bucketsOrDefault(),
		}, labels)).(*prometheus.HistogramVec); ok {
			vec = h
		}
	} else {
		if s, ok := e.register(name, labels, prometheus.NewSummaryVec(prometheus.SummaryOpts{
			Name: name, Help: e.help(name, "timer"),
			Objectives: map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001},
		}, labels)).(*prometheus.SummaryVec); ok {
			vec = s
		}
	}
	return func(labelValues ...string) service.MetricsExporterTimer {
		if vec == nil {
			return noop{}
		}
		o, err := vec.GetMetricWithLabelValues(labelValues...)
		if err != nil {
			return noop{}
		}
		return timer{o}
	}
}

// NewGaugeCtor implements service.MetricsExporter.
func (e *Exporter) NewGaugeCtor(name string, labelKeys ...string) service.MetricsExporterGaugeCtor {
	name = e.name(name)
	labels := sanitizeAll(labelKeys)
	vec, ok := e.register(name, labels, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: name, Help: e.help(name, "gauge"),
	}, labels)).(*prometheus.GaugeVec)
	return func(labelValues ...string) service.MetricsExporterGauge {
		if !ok {
			return noop{}
		}
		g, err := vec.GetMetricWithLabelValues(labelValues...)
		if err != nil {
			return noop{}
		}
		return gauge{g}
	}
}

// help is the HELP text of a metric: the description of this project's
// metrics, and a generic line for Benthos' own.
func (e *Exporter) help(name, kind string) string {
	if h, ok := metricsdoc.Help(strings.TrimPrefix(name, e.prefix+"_")); ok {
		return h
	}
	return "Benthos " + kind + " " + name
}

func (e *Exporter) bucketsOrDefault() []float64 {
	if len(e.buckets) > 0 {
		return e.buckets
	}
	return prometheus.DefBuckets
}

type counter struct{ c prometheus.Counter }

func (c counter) Incr(n int64) { c.c.Add(float64(n)) }

type timer struct{ o prometheus.Observer }

// Timing receives nanoseconds from Benthos and records seconds.
func (t timer) Timing(ns int64) { t.o.Observe(float64(ns) / 1e9) }

type gauge struct{ g prometheus.Gauge }

func (g gauge) Set(v int64)           { g.g.Set(float64(v)) }
func (g gauge) SetFloat64(v float64)  { g.g.Set(v) }
func (g gauge) Incr(n int64)          { g.g.Add(float64(n)) }
func (g gauge) IncrFloat64(v float64) { g.g.Add(v) }
func (g gauge) Decr(n int64)          { g.g.Sub(float64(n)) }
func (g gauge) DecrFloat64(v float64) { g.g.Sub(v) }

// noop stands in for a metric that could not be registered (the warning was
// logged once at registration): the pipeline must not fail over a metric.
type noop struct{}

func (noop) Incr(int64)         {}
func (noop) Timing(int64)       {}
func (noop) Set(int64)          {}
func (noop) SetFloat64(float64) {}

// sanitize maps a Benthos metric or label name onto [a-zA-Z_:][a-zA-Z0-9_:]*.
func sanitize(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == '_' || r == ':' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'):
			b.WriteRune(r)
		case r >= '0' && r <= '9':
			if i == 0 {
				b.WriteByte('_')
			}
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
