package output

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

func parse(t *testing.T, yaml string) (outputConfig, error) {
	t.Helper()
	conf, err := spec().ParseYAML(yaml, nil)
	require.NoError(t, err)
	return outputConfigFromParsed(conf)
}

func TestConfig(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		c, err := parse(t, `
stream: s
partition_key: ${! json("id") }
`)
		require.NoError(t, err)
		assert.Equal(t, "s", c.Stream)
		assert.Equal(t, 64, c.MaxInFlight)
		assert.True(t, c.PreserveOrder)
		assert.Equal(t, 64, c.batchesInFlight(), "ordered with batching: max_in_flight batches, numbered as they are formed")
		assert.True(t, c.numbered())
		assert.Equal(t, service.BatchPolicy{Count: defaultBatchCount, Period: defaultBatchPeriod}, c.Batching, "batches of a full request by default")
		assert.Equal(t, kinesisx.DefaultMaxRecordSize, c.MaxRecordSize)
		assert.Nil(t, c.HashKey)
		assert.False(t, c.Aggregation.Enabled)
		assert.Equal(t, kinesisx.DefaultBackoff, c.Backoff)
	})

	t.Run("a batching field replaces the default", func(t *testing.T) {
		c, err := parse(t, "stream: s\npartition_key: k\nbatching: {count: 100}")
		require.NoError(t, err)
		assert.Equal(t, service.BatchPolicy{Count: 100}, c.Batching)
		c, err = parse(t, "stream: s\npartition_key: k\nbatching: {}")
		require.NoError(t, err)
		assert.True(t, c.Batching.IsNoop(), "batching: {} turns batching off")
	})

	t.Run("unordered writes max_in_flight batches at once", func(t *testing.T) {
		c, err := parse(t, "stream: s\npartition_key: k\npreserve_order: false\nmax_in_flight: 16")
		require.NoError(t, err)
		assert.False(t, c.PreserveOrder)
		assert.Equal(t, 16, c.batchesInFlight())
	})

	// Benthos hands concurrent batches to its writers in no set order. With
	// batching the output numbers its batches as they are formed and keeps
	// that order however many are in flight; without, it takes one at a
	// time unless the user accepts batches in the order they arrive.
	t.Run("ordered batches in flight", func(t *testing.T) {
		for _, tc := range []struct {
			yaml     string
			inFlight int
			numbered bool
		}{
			{"max_in_flight: 16", 16, true},
			{"max_in_flight: 16\nordered_batches_in_flight: 0", 16, true},
			{"max_in_flight: 16\nordered_batches_in_flight: 8", 8, true},
			{"max_in_flight: 16\nordered_batches_in_flight: 1", 1, false},
			{"max_in_flight: 16\nbatching: {}", 1, false},
			{"max_in_flight: 16\nbatching: {}\nordered_batches_in_flight: 8", 8, false},
			{"max_in_flight: 16\npreserve_order: false", 16, false},
		} {
			c, err := parse(t, "stream: s\npartition_key: k\n"+tc.yaml)
			require.NoError(t, err, tc.yaml)
			assert.Equal(t, tc.inFlight, c.batchesInFlight(), tc.yaml)
			assert.Equal(t, tc.numbered, c.numbered(), tc.yaml)
		}
	})

	tests := []struct {
		name, yaml, wantField string
	}{
		{"empty stream", "stream: ' '\npartition_key: k", "field stream"},
		{"ordered_batches_in_flight negative", "stream: s\npartition_key: k\nordered_batches_in_flight: -1", "field ordered_batches_in_flight"},
		{"ordered_batches_in_flight over max_in_flight", "stream: s\npartition_key: k\nmax_in_flight: 4\nordered_batches_in_flight: 5", "field ordered_batches_in_flight"},
		{"max_in_flight zero", "stream: s\npartition_key: k\nmax_in_flight: 0", "field max_in_flight"},
		{"max_record_size over 10 MiB", "stream: s\npartition_key: k\nmax_record_size: 10485761", "field max_record_size"},
		{"max_record_size zero", "stream: s\npartition_key: k\nmax_record_size: 0", "field max_record_size"},
		{"aggregation max_bytes over max_record_size", "stream: s\npartition_key: k\nmax_record_size: 1000\naggregation: {enabled: true}", "field aggregation.max_bytes"},
		{"aggregation max_records zero", "stream: s\npartition_key: k\naggregation: {max_records: 0}", "field aggregation.max_records"},
		{"backoff", "stream: s\npartition_key: k\nbackoff: {initial_interval: 0s}", "field backoff.initial_interval"},
		{"credentials", "stream: s\npartition_key: k\ncredentials: {id: x}", "credentials.id and credentials.secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(t, tt.yaml)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantField)
		})
	}
}

// fakeKinesis answers DescribeStreamSummary, ListShards and PutRecords.
type fakeKinesis struct {
	mu          sync.Mutex
	describeErr error
	described   []*kinesis.DescribeStreamSummaryInput
	puts        []*kinesis.PutRecordsInput
	refuseKey   string // entries with this key are refused every time
	// delay, when set, is how long each PutRecords takes, drawn anew for
	// each call.
	delay func() time.Duration
}

func (f *fakeKinesis) DescribeStreamSummary(_ context.Context, in *kinesis.DescribeStreamSummaryInput, _ ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.described = append(f.described, in)
	if f.describeErr != nil {
		return nil, f.describeErr
	}
	return &kinesis.DescribeStreamSummaryOutput{StreamDescriptionSummary: &types.StreamDescriptionSummary{StreamStatus: types.StreamStatusActive}}, nil
}

func (f *fakeKinesis) ListShards(context.Context, *kinesis.ListShardsInput, ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	return &kinesis.ListShardsOutput{Shards: []types.Shard{{
		ShardId:      aws.String("shardId-000000000000"),
		HashKeyRange: &types.HashKeyRange{StartingHashKey: aws.String("0"), EndingHashKey: aws.String(kinesisx.MaxHashKey)},
	}}}, nil
}

func (f *fakeKinesis) PutRecords(_ context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	if f.delay != nil {
		time.Sleep(f.delay())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.puts = append(f.puts, in)
	out := &kinesis.PutRecordsOutput{Records: make([]types.PutRecordsResultEntry, len(in.Records))}
	for i, e := range in.Records {
		if aws.ToString(e.PartitionKey) == f.refuseKey {
			out.Records[i] = types.PutRecordsResultEntry{ErrorCode: aws.String(kinesisx.CodeProvisionedThroughputExceeded), ErrorMessage: aws.String("Rate exceeded for shard shardId-000000000000")}
			continue
		}
		out.Records[i] = types.PutRecordsResultEntry{SequenceNumber: aws.String("1"), ShardId: aws.String("shardId-000000000000")}
	}
	return out, nil
}

func newTestOutput(t *testing.T, yaml string, api *fakeKinesis) *kinesisOutput {
	t.Helper()
	c, err := parse(t, yaml)
	require.NoError(t, err)
	o, err := newOutputFromConfig(c, service.MockResources())
	require.NoError(t, err)
	o.newClient = func(context.Context) (kinesisAPI, string, error) { return api, "eu-west-1", nil }
	return o
}

func TestConnect(t *testing.T) {
	t.Run("names the stream the way the user did", func(t *testing.T) {
		for _, stream := range []string{"events", "arn:aws:kinesis:eu-west-1:123456789012:stream/events"} {
			api := &fakeKinesis{}
			o := newTestOutput(t, "stream: "+stream+"\npartition_key: k", api)
			require.NoError(t, o.Connect(t.Context()))
			require.NoError(t, o.WriteBatch(t.Context(), service.MessageBatch{service.NewMessage([]byte("x"))}))
			if strings.HasPrefix(stream, "arn:") {
				assert.Equal(t, stream, aws.ToString(api.described[0].StreamARN))
				assert.Nil(t, api.described[0].StreamName)
				assert.Equal(t, stream, aws.ToString(api.puts[0].StreamARN))
				assert.Nil(t, api.puts[0].StreamName)
			} else {
				assert.Equal(t, stream, aws.ToString(api.described[0].StreamName))
				assert.Nil(t, api.described[0].StreamARN)
				assert.Equal(t, stream, aws.ToString(api.puts[0].StreamName))
				assert.Nil(t, api.puts[0].StreamARN)
			}
		}
	})

	tests := []struct {
		name string
		err  error
		want string
	}{
		{"missing stream", &smithy.GenericAPIError{Code: kinesisx.CodeResourceNotFound, Message: "Stream events under account 1 not found."}, "stream events does not exist in region eu-west-1"},
		{"denied access", &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized"}, "access to stream events in region eu-west-1 is denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &fakeKinesis{describeErr: tt.err}
			o := newTestOutput(t, "stream: events\npartition_key: k", api)
			err := o.Connect(t.Context())
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Len(t, api.described, 1, "no retry loop")
		})
	}

	t.Run("write before connect", func(t *testing.T) {
		o := newTestOutput(t, "stream: events\npartition_key: k", &fakeKinesis{})
		assert.ErrorIs(t, o.WriteBatch(t.Context(), service.MessageBatch{service.NewMessage(nil)}), service.ErrNotConnected)
	})
}

func TestWriteBatchMarksExactlyTheFailedMessages(t *testing.T) {
	api := &fakeKinesis{refuseKey: "refused"}
	o := newTestOutput(t, `
stream: events
max_record_size: 100
partition_key: '${! if content() == "bad" { throw("no key for this message") } else if content() == "refused" { "refused" } else if content() == "nokey" { "" } else { "key-" + content() } }'
max_retries: 2
backoff: {initial_interval: 1ms, max_interval: 1ms}
`, api)
	require.NoError(t, o.Connect(t.Context()))

	bodies := []string{"a", "bad", "b", "refused", "nokey", strings.Repeat("x", 100), "c"}
	var batch service.MessageBatch
	for _, b := range bodies {
		batch = append(batch, service.NewMessage([]byte(b)))
	}
	err := o.WriteBatch(t.Context(), batch)
	require.Error(t, err)
	var bErr *service.BatchError
	require.ErrorAs(t, err, &bErr)
	assert.Contains(t, err.Error(), "4 of 7 messages failed")

	failed := map[int]string{}
	bErr.WalkMessages(func(i int, _ *service.Message, err error) bool {
		if err != nil {
			failed[i] = err.Error()
		}
		return true
	})
	require.Len(t, failed, 4)
	assert.Contains(t, failed[1], "interpolating partition_key")
	assert.Contains(t, failed[3], kinesisx.CodeProvisionedThroughputExceeded)
	assert.Contains(t, failed[3], "after 3 attempts")
	assert.Contains(t, failed[4], "partition key is empty")
	assert.Contains(t, failed[5], "204 bytes")
	assert.Contains(t, failed[5], "is 100")

	// a, b and c were written once each; "refused" was tried three times.
	sent := map[string]int{}
	for _, p := range api.puts {
		for _, e := range p.Records {
			sent[string(e.Data)]++
		}
	}
	assert.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1, "refused": 3}, sent)
}

func TestWriteBatchAllGood(t *testing.T) {
	api := &fakeKinesis{}
	o := newTestOutput(t, "stream: events\npartition_key: '${! content() }'\nhash_key: '${! \"12345\" }'", api)
	require.NoError(t, o.Connect(t.Context()))
	var batch service.MessageBatch
	for i := range 1200 {
		batch = append(batch, service.NewMessage([]byte(fmt.Sprint(i))))
	}
	require.NoError(t, o.WriteBatch(t.Context(), batch))
	require.Len(t, api.puts, 3, "500 + 500 + 200")
	assert.Equal(t, "12345", aws.ToString(api.puts[0].Records[0].ExplicitHashKey))
	require.NoError(t, o.Close(t.Context()))
	require.NoError(t, o.Close(t.Context()), "Close is idempotent")
}

func TestAggregationUsesTheShardMap(t *testing.T) {
	api := &fakeKinesis{}
	o := newTestOutput(t, "stream: events\npartition_key: '${! content() }'\naggregation: {enabled: true}", api)
	require.NoError(t, o.Connect(t.Context()))
	var batch service.MessageBatch
	for i := range 300 {
		batch = append(batch, service.NewMessage([]byte(fmt.Sprint(i))))
	}
	require.NoError(t, o.WriteBatch(t.Context(), batch))
	require.Len(t, api.puts, 1)
	assert.Len(t, api.puts[0].Records, 1, "one shard, 300 small messages, one aggregated record")
}

// TestMetadataPartitionKeyIsTheInterpolations: a partition_key that is one
// metadata value is read without Bloblang, and gives what the interpolation
// gives for every kind of value, missing and empty ones included.
func TestMetadataPartitionKeyIsTheInterpolations(t *testing.T) {
	for _, raw := range []string{`${! meta("key") }`, `${!meta("key")}`, `${! meta("key") } `, `k-${! meta("key") }`, `${! @key }`} {
		t.Run(raw, func(t *testing.T) {
			c, err := spec().ParseYAML(fmt.Sprintf("stream: s\npartition_key: '%s'", raw), nil)
			require.NoError(t, err)
			oc, err := outputConfigFromParsed(c)
			require.NoError(t, err)
			direct := raw == `${! meta("key") }` || raw == `${!meta("key")}`
			assert.Equal(t, direct, oc.partitionKeyMeta == "key", "read without Bloblang")

			batch := service.MessageBatch{}
			for _, v := range []any{"user-1", 42, 1.5, true, "", []byte("raw"), map[string]any{"a": 1}} {
				m := service.NewMessage([]byte("x"))
				m.MetaSetMut("key", v)
				batch = append(batch, m)
			}
			batch = append(batch, service.NewMessage([]byte("no key")))
			keys := keyOf{meta: oc.partitionKeyMeta, exec: batch.InterpolationExecutor(oc.PartitionKey)}
			exec := batch.InterpolationExecutor(oc.PartitionKey)
			for i, m := range batch {
				want, wantErr := exec.TryString(i)
				got, gotErr := keys.TryString(i, m)
				assert.Equal(t, wantErr, gotErr, "message %d", i)
				assert.Equal(t, want, got, "message %d", i)
			}
		})
	}
}
