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
