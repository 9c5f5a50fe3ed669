package prometheus

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redpanda-data/benthos/v4/public/service"
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
	collectors map[string]registered
	// refused holds the name, labels and kind of each metric refused,
	// so each is warned about once.
	refused map[string]bool
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
		collectors:   map[string]registered{},
		refused:      map[string]bool{},
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
