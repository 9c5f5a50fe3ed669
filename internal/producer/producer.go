package producer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// Metric names.
const (
	MetricRecords    = "kinesis_output_records_total"
	MetricBytes      = "kinesis_output_bytes_total"
	MetricRetries    = "kinesis_output_retries_total"
	MetricFailed     = "kinesis_output_failed_total"
	MetricPutLatency = "kinesis_output_put_latency_ns"
	// MetricKeyWaited counts the records of ordered writes that did not go
	// in their write's first round: their partition key was already in that
	// round (a request holds each key once) or in an earlier write still
	// in flight. Each record counts once per write.
	MetricKeyWaited = "kinesis_output_records_key_waited_total"
)

// API is the part of the Kinesis client the producer uses: PutRecords to
// write, ListShards to map shards for ordering and aggregation.
type API interface {
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
	kinesisx.ListShardsAPI
}

// Config says where and how to write.
type Config struct {
	// StreamName or StreamARN names the stream; exactly one is set. The ARN
	// is only sent when the user configured one, as some emulators reject it.
	StreamName string
	StreamARN  string
	// MaxRecordSize bounds one record, data plus partition key.
	MaxRecordSize int
	// MaxInFlight bounds the PutRecords requests in flight across all
	// writes.
	MaxInFlight int
	// Ordered keeps the records of each partition key in the order of the
	// entries, and across writes in the order the writes began (see
	// Reserve): a partition key at most once per request and in at most one
	// request in flight, and a refused record retried before any later
	// record of its key is sent. Writes may overlap.
	Ordered bool
	// SingleWriter says the caller never has two ordered writes in progress
	// at once (an output that takes one batch at a time). Each write then
	// begins after the one before it ended, so the book of keys held by
	// earlier writes (see Reserve) has nothing to order and is skipped: a
	// batch of tens of thousands of records no longer pays for entering and
	// releasing each of its keys.
	SingleWriter bool
	Backoff      kinesisx.Backoff
	Aggregation  Aggregation
	// KeyBound, if set, is called after the first round of an ordered
	// write of records in which more than half (repeated) had to wait
	// for an earlier record of their partition key in the same write:
	// the write then takes a round trip per repetition of its most
	// repeated key. Called on the write's goroutine, once per write.
	KeyBound func(records, repeated int)
}

// Aggregation configures KPL aggregation.
type Aggregation struct {
	Enabled bool
	// MaxBytes bounds one aggregated record; records larger than this are
	// sent on their own.
	MaxBytes int
	// MaxRecords bounds the user records in one aggregated record.
	MaxRecords int
}

// RecordError is why an accepted-looking record was finally refused: the
// error code and message of Kinesis' last answer for it.
type RecordError struct {
	Code     string
	Message  string
	Attempts int
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("kinesis refused the record after %d attempts: %s: %s", e.Attempts, e.Code, e.Message)
}

// Producer writes entries to one stream. It is safe for concurrent use.
type Producer struct {
	api    API
	conf   Config
	log    *service.Logger
	policy retrypolicy.RetryPolicy[putResult]
	slots  chan struct{}
	shards atomic.Pointer[ShardMap]
	// refreshing serialises shard map refreshes, so that many records seen
	// on an unexpected shard at once cost one listing.
	refreshing sync.Mutex
	warn       *rateLimitedLogger
	// order sequences overlapping ordered writes by partition key.
	order keyOrder

	mRecords, mBytes, mFailed *service.MetricCounter
	mRetries, mKeyWaited      *service.MetricCounter
	mLatency                  *service.MetricTimer
}

// New returns a Producer. log and metrics may come from service.MockResources
// in tests.
func New(api API, conf Config, log *service.Logger, metrics *service.Metrics) *Producer {
	if conf.MaxInFlight < 1 {
		conf.MaxInFlight = 1
	}
	if conf.MaxRecordSize <= 0 {
		conf.MaxRecordSize = kinesisx.DefaultMaxRecordSize
	}
	p := &Producer{
		api:      api,
		conf:     conf,
		log:      log,
		slots:    make(chan struct{}, conf.MaxInFlight),
		warn:     &rateLimitedLogger{log: log, every: 10 * time.Second},
		mRecords: metrics.NewCounter(MetricRecords, "stream"),
		mBytes:   metrics.NewCounter(MetricBytes, "stream"),
		mFailed:  metrics.NewCounter(MetricFailed, "stream", "reason"),
		mRetries: metrics.NewCounter(MetricRetries, "stream", "code"),
		mLatency: metrics.NewTimer(MetricPutLatency, "stream"),

		mKeyWaited: metrics.NewCounter(MetricKeyWaited, "stream"),
	}
	p.policy = kinesisx.RetryBuilder[putResult](conf.Backoff).
		// A response with refused entries is retried like an error; only
		// those entries go out again (the attempt keeps the rest done).
		HandleIf(func(r putResult, err error) bool { return err == nil && r.failed > 0 }).
		OnRetry(p.onRetry).
		Build()
	return p
}

// streamLabel is the stream's name, the `stream` label of every metric.
func (p *Producer) streamLabel() string { return kinesisx.StreamName(p.streamID()) }

func (p *Producer) streamID() string {
	if p.conf.StreamARN != "" {
		return p.conf.StreamARN
	}
	return p.conf.StreamName
}
