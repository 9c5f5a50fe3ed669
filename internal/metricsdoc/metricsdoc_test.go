package metricsdoc_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/metricsdoc"
	"github.com/connect-kinesis/connect-kinesis/internal/producer"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
	"github.com/connect-kinesis/connect-kinesis/plugins/output"
)

// Every metric name the plugins use is documented, under its plugin, and
// every documented metric follows the naming rules users alert on.
func TestEveryMetricIsDocumented(t *testing.T) {
	names := func(ms []metricsdoc.Metric) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Name)
		}
		return out
	}
	for _, n := range []string{
		consumer.MetricRecords, consumer.MetricBytes, consumer.MetricRecordsDropped, consumer.MetricMillisBehind, consumer.MetricShardsOwned, consumer.MetricShardsUnowned, consumer.MetricStreams,
		consumer.MetricThrottled, consumer.MetricIteratorExpired, consumer.MetricLeasesTaken, consumer.MetricLeasesLost,
		consumer.MetricBufferedBytes, consumer.MetricMaxBufferedBytes, consumer.MetricShardsWaitingForBuffer,
		consumer.MetricRedelivered, consumer.MetricDeadLettered, consumer.MetricDeadLetterErrors, consumer.MetricRedeliveryOldest,
		checkpointer.MetricCommits, checkpointer.MetricErrors, checkpointer.MetricCommitLatency,
	} {
		assert.Contains(t, names(metricsdoc.Input), n)
	}
	for _, n := range []string{producer.MetricRecords, producer.MetricBytes, producer.MetricRetries, producer.MetricFailed, producer.MetricPutLatency, output.MetricNullPartitionKeys} {
		assert.Contains(t, names(metricsdoc.Output), n)
	}
	for _, m := range slices.Concat(metricsdoc.Input, metricsdoc.Output) {
		assert.NotEmpty(t, m.Help, m.Name)
		assert.NotEmpty(t, m.Unit, m.Name)
		switch m.Type {
		case metricsdoc.Counter:
			assert.True(t, strings.HasSuffix(m.Name, "_total"), "counter %s ends in _total", m.Name)
		case metricsdoc.Timer:
			assert.True(t, strings.HasSuffix(m.PrometheusName(), "_seconds"), m.Name)
		}
		if strings.HasPrefix(m.Name, "kinesis_output_") {
			assert.Contains(t, m.Labels, "stream", "output metric %s has a stream label", m.Name)
		}
	}
}
