// Command embedding is a Benthos binary of your own with the connect-kinesis
// plugins: the way to combine the `kinesis` input and output with components
// the connect-kinesis binary does not include (S3, Kafka, SQL, ...).
//
// It builds as it is with Benthos' core components only. Add the blank
// import of each component package you need next to them; those from
// Redpanda Connect (github.com/redpanda-data/connect/v4/public/components/...)
// come under Redpanda's licence terms, which you must check for your use:
// this repository neither depends on nor tests them.
package main

import (
	"context"

	"github.com/redpanda-data/benthos/v4/public/service"

	// Benthos core components: generate, mapping, file, http_client, ...
	_ "github.com/redpanda-data/benthos/v4/public/components/io"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"

	_ "github.com/connect-kinesis/connect-kinesis/plugins/input"    // the kinesis input
	_ "github.com/connect-kinesis/connect-kinesis/plugins/output"   // the kinesis output
	"github.com/connect-kinesis/connect-kinesis/plugins/prometheus" // the kinesis_prometheus metrics exporter
)

func main() {
	// Also serve the exporter as `prometheus` (a no-op when another
	// exporter, e.g. Redpanda Connect's, already has that name).
	if _, err := prometheus.RegisterAsPrometheus(service.GlobalEnvironment()); err != nil {
		panic(err)
	}
	service.RunCLI(context.Background())
}
