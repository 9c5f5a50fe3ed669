package producer

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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
	"github.com/connect-kinesis/connect-kinesis/internal/kpl"
)

// fakeAPI records every PutRecords call and answers with respond, which
// decides per call (numbered from 0) and per entry what Kinesis says. Each
// accepted record lands on the open shard of shards (one shard if nil) that
// owns its hash key, as on Kinesis; ListShards lists shards.
type fakeAPI struct {
	mu       sync.Mutex
	calls    [][]types.PutRecordsRequestEntry
	respond  func(call int, entries []types.PutRecordsRequestEntry) (refuse map[int]string, err error)
	shards   []types.Shard
	landed   []landedRecord
	inFlight atomic.Int32
	maxSeen  atomic.Int32
	delay    time.Duration
}

// landedRecord is a record the fake accepted, in the order it accepted them.
type landedRecord struct {
	shard string
	entry types.PutRecordsRequestEntry
}

func (f *fakeAPI) listing() []types.Shard {
	if f.shards != nil {
		return f.shards
	}
	return []types.Shard{{
		ShardId:      aws.String("shardId-000000000000"),
		HashKeyRange: &types.HashKeyRange{StartingHashKey: aws.String("0"), EndingHashKey: aws.String(kinesisx.MaxHashKey)},
	}}
}

func (f *fakeAPI) ListShards(context.Context, *kinesis.ListShardsInput, ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &kinesis.ListShardsOutput{Shards: f.listing()}, nil
}

// reshard replaces the fake's shards, as a split or merge does.
func (f *fakeAPI) reshard(shards []types.Shard) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shards = shards
}

func (f *fakeAPI) PutRecords(_ context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		m := f.maxSeen.Load()
		if n <= m || f.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(f.delay)

	// The whole call is one step under the lock, so the order of landed
	// is the order records landed in.
	f.mu.Lock()
	defer f.mu.Unlock()
	call := len(f.calls)
	f.calls = append(f.calls, append([]types.PutRecordsRequestEntry(nil), in.Records...))

	var refuse map[int]string
	if f.respond != nil {
		var err error
		if refuse, err = f.respond(call, in.Records); err != nil {
			return nil, err
		}
	}
	m, err := NewShardMap(f.listing())
	if err != nil {
		return nil, err
	}
	out := &kinesis.PutRecordsOutput{Records: make([]types.PutRecordsResultEntry, len(in.Records))}
	for i, e := range in.Records {
		if code, ok := refuse[i]; ok {
			out.Records[i] = types.PutRecordsResultEntry{ErrorCode: aws.String(code), ErrorMessage: aws.String("refused by the fake")}
			out.FailedRecordCount = aws.Int32(aws.ToInt32(out.FailedRecordCount) + 1)
			continue
		}
		shard := m.ShardFor(Entry{PartitionKey: aws.ToString(e.PartitionKey), ExplicitHashKey: aws.ToString(e.ExplicitHashKey)})
		f.landed = append(f.landed, landedRecord{shard: shard, entry: e})
		out.Records[i] = types.PutRecordsResultEntry{SequenceNumber: aws.String(fmt.Sprint(call*1000 + i)), ShardId: aws.String(shard)}
	}
	return out, nil
}

// sent counts how often each data payload was sent in calls that the fake
// accepted, i.e. how often each record landed.
func (f *fakeAPI) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

var testBackoff = kinesisx.Backoff{MaxRetries: 5, InitialInterval: time.Millisecond, MaxInterval: 2 * time.Millisecond}

func newTestProducer(api API, mod func(*Config)) *Producer {
	conf := Config{StreamName: "s", MaxRecordSize: kinesisx.DefaultMaxRecordSize, MaxInFlight: 4, Backoff: testBackoff}
	if mod != nil {
		mod(&conf)
	}
	res := service.MockResources()
	return New(api, conf, res.Logger(), res.Metrics())
}

func entries(n, size int) []Entry {
	out := make([]Entry, n)
	for i := range out {
		key := fmt.Sprintf("k%d", i)
		data := []byte(fmt.Sprintf("%08d", i))
		if size > len(key)+len(data) {
			data = append(data, make([]byte, size-len(key)-len(data))...)
		}
		out[i] = Entry{Data: data, PartitionKey: key}
	}
	return out
}

func requestSizes(calls [][]types.PutRecordsRequestEntry) (counts, bytes []int) {
	for _, c := range calls {
		b := 0
		for _, e := range c {
			b += len(e.Data) + len(aws.ToString(e.PartitionKey))
		}
		counts = append(counts, len(c))
		bytes = append(bytes, b)
	}
	return counts, bytes
}

func TestPackingBoundaries(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name       string
		entries    []Entry
		wantCounts []int
		wantBytes  []int
	}{
		{"exactly 500 records", entries(500, 20), []int{500}, []int{10000}},
		{"501 records", entries(501, 20), []int{500, 1}, []int{10000, 20}},
		{"exactly 5 MiB", entries(5, mib), []int{5}, []int{5 * mib}},
		{"one record past 5 MiB", entries(6, mib), []int{5, 1}, []int{5 * mib, mib}},
		{"bytes bind before count", entries(20, mib/4), []int{20}, []int{5 * mib}},
		{"bytes split a count-sized batch", entries(21, mib/4), []int{20, 1}, []int{5 * mib, mib / 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &fakeAPI{}
			p := newTestProducer(api, func(c *Config) { c.MaxInFlight = 1 })
			require.Nil(t, p.Write(t.Context(), tt.entries))
			counts, bytes := requestSizes(api.calls)
			assert.Equal(t, tt.wantCounts, counts)
			assert.Equal(t, tt.wantBytes, bytes)
			// Order within and across requests follows the batch here
			// (one request in flight).
			var got []string
			for _, c := range api.calls {
				for _, e := range c {
					got = append(got, aws.ToString(e.PartitionKey))
				}
			}
			for i, e := range tt.entries {
				assert.Equal(t, e.PartitionKey, got[i])
			}
		})
	}
}

func TestValidation(t *testing.T) {
	const limit = 1000
	key256 := strings.Repeat("é", 256) // 512 bytes, 256 characters
	tests := []struct {
		name  string
		entry Entry
		want  error
	}{
		{"ok", Entry{Data: []byte("x"), PartitionKey: "k"}, nil},
		{"empty key", Entry{Data: []byte("x")}, ErrEmptyPartitionKey},
		{"256 characters in 512 bytes", Entry{Data: []byte("x"), PartitionKey: key256}, nil},
		{"257 characters", Entry{Data: []byte("x"), PartitionKey: key256 + "a"}, ErrPartitionKeyTooLong},
		{"not UTF-8", Entry{Data: []byte("x"), PartitionKey: "bad\xffkey"}, ErrPartitionKeyNotUTF8},
		{"exactly at the limit with the key counted", Entry{Data: make([]byte, limit-3), PartitionKey: "abc"}, nil},
		{"one byte over with the key counted", Entry{Data: make([]byte, limit-2), PartitionKey: "abc"}, ErrRecordTooLarge},
		{"hash key zero", Entry{Data: []byte("x"), PartitionKey: "k", ExplicitHashKey: "0"}, nil},
		{"hash key 2^128-1", Entry{Data: []byte("x"), PartitionKey: "k", ExplicitHashKey: kinesisx.MaxHashKey}, nil},
		{"hash key 2^128", Entry{Data: []byte("x"), PartitionKey: "k", ExplicitHashKey: "340282366920938463463374607431768211456"}, ErrInvalidHashKey},
		{"hash key 40 digits", Entry{Data: []byte("x"), PartitionKey: "k", ExplicitHashKey: "1000000000000000000000000000000000000000"}, ErrInvalidHashKey},
		{"hash key negative", Entry{Data: []byte("x"), PartitionKey: "k", ExplicitHashKey: "-1"}, ErrInvalidHashKey},
		{"hash key leading zero", Entry{Data: []byte("x"), PartitionKey: "k", ExplicitHashKey: "01"}, ErrInvalidHashKey},
		{"hash key not a number", Entry{Data: []byte("x"), PartitionKey: "k", ExplicitHashKey: "12a"}, ErrInvalidHashKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.entry, limit)
			if tt.want == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tt.want)
		})
	}
}

func TestInvalidMessagesFailAlone(t *testing.T) {
	api := &fakeAPI{}
	p := newTestProducer(api, func(c *Config) { c.MaxRecordSize = 100 })
	in := entries(10, 20)
	in[2].PartitionKey = ""
	in[5].Data = make([]byte, 100) // 100 + len("k5") = 102 > 100
	in[7].ExplicitHashKey = "not-a-number"

	errs := p.Write(t.Context(), in)
	require.Len(t, errs, 10)
	for i, err := range errs {
		switch i {
		case 2:
			assert.ErrorIs(t, err, ErrEmptyPartitionKey)
		case 5:
			assert.ErrorIs(t, err, ErrRecordTooLarge)
			assert.Contains(t, err.Error(), "102 bytes")
			assert.Contains(t, err.Error(), "limit (max_record_size) is 100")
		case 7:
			assert.ErrorIs(t, err, ErrInvalidHashKey)
		default:
			assert.NoError(t, err, "message %d", i)
		}
	}
	require.Len(t, api.calls, 1)
	assert.Len(t, api.calls[0], 7, "only the valid messages are sent")
}

func TestPartialFailureRetriesOnlyRefusedEntries(t *testing.T) {
	api := &fakeAPI{respond: func(call int, in []types.PutRecordsRequestEntry) (map[int]string, error) {
		switch call {
		case 0:
			return map[int]string{1: kinesisx.CodeProvisionedThroughputExceeded, 3: kinesisx.CodeInternalFailure, 4: kinesisx.CodeKMSThrottling}, nil
		case 1:
			return map[int]string{0: kinesisx.CodeProvisionedThroughputExceeded}, nil // entry 1 again
		}
		return nil, nil
	}}
	p := newTestProducer(api, nil)
	require.Nil(t, p.Write(t.Context(), entries(6, 20)))

	keys := func(c []types.PutRecordsRequestEntry) (out []string) {
		for _, e := range c {
			out = append(out, aws.ToString(e.PartitionKey))
		}
		return out
	}
	require.Len(t, api.calls, 3)
	assert.Equal(t, []string{"k0", "k1", "k2", "k3", "k4", "k5"}, keys(api.calls[0]))
	assert.Equal(t, []string{"k1", "k3", "k4"}, keys(api.calls[1]), "only refused entries, in order")
	assert.Equal(t, []string{"k1"}, keys(api.calls[2]))
}

func TestRetryBudgetExhaustedNamesExactlyTheFailedMessages(t *testing.T) {
	api := &fakeAPI{respond: func(_ int, in []types.PutRecordsRequestEntry) (map[int]string, error) {
		refuse := map[int]string{}
		for i, e := range in {
			switch aws.ToString(e.PartitionKey) {
			case "k2":
				refuse[i] = kinesisx.CodeProvisionedThroughputExceeded
			case "k7":
				refuse[i] = kinesisx.CodeInternalFailure
			}
		}
		return refuse, nil
	}}
	p := newTestProducer(api, func(c *Config) { c.Backoff.MaxRetries = 3 })
	errs := p.Write(t.Context(), entries(10, 20))
	require.Len(t, errs, 10)
	for i, err := range errs {
		switch i {
		case 2, 7:
			var re *RecordError
			require.ErrorAs(t, err, &re, "message %d", i)
			assert.Equal(t, 4, re.Attempts, "first attempt and 3 retries")
			if i == 2 {
				assert.Equal(t, kinesisx.CodeProvisionedThroughputExceeded, re.Code)
			} else {
				assert.Equal(t, kinesisx.CodeInternalFailure, re.Code)
			}
			assert.Contains(t, err.Error(), "refused by the fake")
		default:
			assert.NoError(t, err, "message %d", i)
		}
	}
	assert.Equal(t, 4, api.callCount())
	for _, c := range api.calls[1:] {
		assert.Len(t, c, 2, "accepted records are never sent again")
	}
}

func TestWholeRequestErrors(t *testing.T) {
	throttle := &smithy.GenericAPIError{Code: kinesisx.CodeProvisionedThroughputExceeded, Message: "slow down"}
	notFound := &smithy.GenericAPIError{Code: kinesisx.CodeResourceNotFound, Message: "Stream s not found"}

	t.Run("retryable error is retried", func(t *testing.T) {
		api := &fakeAPI{respond: func(call int, _ []types.PutRecordsRequestEntry) (map[int]string, error) {
			if call < 2 {
				return nil, throttle
			}
			return nil, nil
		}}
		p := newTestProducer(api, nil)
		assert.Nil(t, p.Write(t.Context(), entries(3, 20)))
		assert.Equal(t, 3, api.callCount())
	})
	t.Run("fatal error fails every message at once", func(t *testing.T) {
		api := &fakeAPI{respond: func(int, []types.PutRecordsRequestEntry) (map[int]string, error) { return nil, notFound }}
		p := newTestProducer(api, nil)
		errs := p.Write(t.Context(), entries(3, 20))
		require.Len(t, errs, 3)
		for _, err := range errs {
			assert.ErrorIs(t, err, notFound)
			assert.Contains(t, err.Error(), "stream s")
		}
		assert.Equal(t, 1, api.callCount(), "no retry of a fatal error")
	})
	t.Run("retryable error until the budget ends", func(t *testing.T) {
		api := &fakeAPI{respond: func(int, []types.PutRecordsRequestEntry) (map[int]string, error) { return nil, throttle }}
		p := newTestProducer(api, func(c *Config) { c.Backoff.MaxRetries = 2 })
		errs := p.Write(t.Context(), entries(3, 20))
		require.Len(t, errs, 3)
		for _, err := range errs {
			assert.ErrorIs(t, err, throttle)
		}
		assert.Equal(t, 3, api.callCount())
	})
	t.Run("cancelled context stops retrying", func(t *testing.T) {
		api := &fakeAPI{respond: func(int, []types.PutRecordsRequestEntry) (map[int]string, error) { return nil, throttle }}
		p := newTestProducer(api, func(c *Config) {
			c.Backoff = kinesisx.Backoff{InitialInterval: 10 * time.Millisecond, MaxInterval: 10 * time.Millisecond}
		})
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		errs := p.Write(ctx, entries(3, 20))
		require.Len(t, errs, 3)
		for _, err := range errs {
			assert.Error(t, err)
		}
	})
}

func testShardMap(t *testing.T, n int) *ShardMap {
	t.Helper()
	m, err := NewShardMap(testShards(n))
	require.NoError(t, err)
	return m
}

// testShards is a listing of n open shards splitting the hash key space
// evenly.
func testShards(n int) []types.Shard {
	var shards []types.Shard
	last, _ := parseHashKey(kinesisx.MaxHashKey)
	for i := range n {
		var start, end hashKey
		start[0] = byte(256 * i / n)
		if i == n-1 {
			end = last
		} else {
			end[0] = byte(256*(i+1)/n) - 1
			for j := 1; j < 16; j++ {
				end[j] = 0xFF
			}
		}
		shards = append(shards, types.Shard{
			ShardId:      aws.String(fmt.Sprintf("shardId-%012d", i)),
			HashKeyRange: &types.HashKeyRange{StartingHashKey: aws.String(start.decimal()), EndingHashKey: aws.String(end.decimal())},
		})
	}
	return shards
}

func TestAggregation(t *testing.T) {
	shards := testShardMap(t, 4)
	in := entries(1000, 40)
	in[10].Data = make([]byte, 3000) // bigger than max_bytes: sent alone
	in[20].ExplicitHashKey = "0"     // shard 0 whatever its key

	api := &fakeAPI{shards: testShards(4)}
	p := newTestProducer(api, func(c *Config) {
		c.Aggregation = Aggregation{Enabled: true, MaxBytes: 2048, MaxRecords: 100}
	})
	p.SetShardMap(shards)
	require.Nil(t, p.Write(t.Context(), in))

	seen := map[string]int{}
	aggregates := 0
	for _, c := range api.calls {
		for _, e := range c {
			if !kpl.IsAggregated(e.Data) {
				seen[aws.ToString(e.PartitionKey)]++
				continue
			}
			aggregates++
			assert.LessOrEqual(t, len(e.Data)+len(aws.ToString(e.PartitionKey)), 2048)
			// Every member belongs to the shard the aggregate goes to.
			dest := shards.ShardFor(Entry{PartitionKey: aws.ToString(e.PartitionKey), ExplicitHashKey: aws.ToString(e.ExplicitHashKey)})
			recs, err := kpl.Decode(e.Data)
			require.NoError(t, err)
			assert.LessOrEqual(t, len(recs), 100)
			for _, r := range recs {
				assert.Equal(t, dest, shards.ShardFor(Entry{PartitionKey: r.PartitionKey, ExplicitHashKey: r.ExplicitHashKey}))
				seen[r.PartitionKey]++
			}
		}
	}
	assert.Len(t, seen, 1000, "every message is written")
	for k, n := range seen {
		assert.Equal(t, 1, n, "message %s written once", k)
	}
	assert.Less(t, aggregates, 100, "small records share aggregates")
}

func TestAggregateFailureFailsEveryMember(t *testing.T) {
	api := &fakeAPI{respond: func(_ int, in []types.PutRecordsRequestEntry) (map[int]string, error) {
		refuse := map[int]string{}
		for i := range in {
			refuse[i] = kinesisx.CodeInternalFailure
		}
		return refuse, nil
	}}
	p := newTestProducer(api, func(c *Config) {
		c.Aggregation = Aggregation{Enabled: true, MaxBytes: 50 << 10, MaxRecords: 1000}
		c.Backoff.MaxRetries = 1
	})
	p.SetShardMap(testShardMap(t, 1))
	errs := p.Write(t.Context(), entries(50, 20))
	require.Len(t, errs, 50)
	for _, err := range errs {
		var re *RecordError
		assert.ErrorAs(t, err, &re)
	}
	require.Len(t, api.calls, 2)
	assert.Len(t, api.calls[0], 1, "one aggregate for one shard")
}
