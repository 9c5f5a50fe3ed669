package prometheus

import "github.com/prometheus/client_golang/prometheus"

// The values Benthos metrics write through: each adapts a Prometheus metric
// to the service.MetricsExporter* interface it serves.

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
