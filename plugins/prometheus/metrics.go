package prometheus

import (
	"errors"
	"reflect"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/metricsdoc"
)

// registered is a collector with the label names it was registered with.
type registered struct {
	c      prometheus.Collector
	labels []string
}

// register returns the collector already registered under name, or registers
// c. Benthos asks for the same metric once per component, so a second call
// with the same name and labels shares the first collector. A call with the
// same name but other labels (or of another kind) cannot be served: it gets
// nil, so its metric is not exported, and a WARN names it once; handing it
// the first collector would record its values under the first one's label
// names, or fail on every use when the counts differ.
func (e *Exporter) register(name string, labels []string, c prometheus.Collector) prometheus.Collector {
	e.mu.Lock()
	defer e.mu.Unlock()
	if existing, ok := e.collectors[name]; ok {
		if slices.Equal(existing.labels, labels) && reflect.TypeOf(existing.c) == reflect.TypeOf(c) {
			return existing.c
		}
		key := name + "\x00" + strings.Join(labels, ",") + "\x00" + reflect.TypeOf(c).String()
		if !e.refused[key] && e.log != nil {
			e.refused[key] = true
			e.log.With("metric", name, "labels", strings.Join(labels, ","), "registered_labels", strings.Join(existing.labels, ",")).
				Warnf("Metric not exported: a metric of this name is already exported with other labels or of another type; give one of them another name (a metric processor's name, or its labels)")
		}
		return nil
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
	e.collectors[name] = registered{c: c, labels: labels}
	return c
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
