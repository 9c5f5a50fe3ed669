package consumer

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/kpl"
)

// fakeShard is a shard of fakeKinesis: records numbered from 1.
type fakeShard struct {
	parent, adjacent string
	records          int
	closed           bool
	// aggregate > 0 makes every record a KPL aggregate of that many user
	// records with data "<shard>/<i>.<j>".
	aggregate int
	// behind is the MillisBehindLatest every response reports.
	behind int64
	// keys > 0 gives record i the partition key "k<i mod keys>"; without
	// it every plain record has the key "k".
	keys int
	// hashRange is listed as the shard's HashKeyRange when set.
	hashRange *types.HashKeyRange
	// memberKey, when set, is the partition key of user record j of
	// aggregate i (else "k<j>").
	memberKey func(i, j int) string
	// memberSize > 0 pads the data of every user record of an aggregate
	// to that many bytes.
	memberSize int
}

// fakeKinesis serves shards whose record i has sequence number
// <shard number>*1e6+i and data "<shard>/<i>". Iterators are
// "<shard>/<next index>".
type fakeKinesis struct {
	mu        sync.Mutex
	shards    map[string]*fakeShard
	calls     map[string][]time.Time // GetRecords call times per shard
	limits    map[string][]int32     // GetRecords Limits per shard
	iterReqs  []kinesis.GetShardIteratorInput
	expireAt  map[string]int // shard -> GetRecords call number that answers ExpiredIterator once
	getErrors map[string]error
	// throttle makes the next n GetRecords calls of a shard fail with
	// ProvisionedThroughputExceeded.
	throttle map[string]int
	// created is the stream's creation time DescribeStreamSummary gives
	// (none when zero).
	created time.Time
}

func newFakeKinesis() *fakeKinesis {
	return &fakeKinesis{shards: map[string]*fakeShard{}, calls: map[string][]time.Time{}, expireAt: map[string]int{}, getErrors: map[string]error{}, throttle: map[string]int{}}
}

func (f *fakeKinesis) add(id string, s *fakeShard) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shards[id] = s
}

func shardNum(id string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "shardId-"))
	return n
}

func seqOf(shard string, i int) string { return strconv.Itoa(shardNum(shard)*1000000 + i) }

const fakeARNPrefix = "arn:aws:kinesis:us-east-1:000000000000:stream/"

func (f *fakeKinesis) DescribeStreamSummary(_ context.Context, in *kinesis.DescribeStreamSummaryInput, _ ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	f.mu.Lock()
	created := f.created
	f.mu.Unlock()
	name := aws.ToString(in.StreamName)
	if in.StreamARN != nil {
		name = strings.TrimPrefix(aws.ToString(in.StreamARN), fakeARNPrefix)
	}
	return &kinesis.DescribeStreamSummaryOutput{StreamDescriptionSummary: &types.StreamDescriptionSummary{
		StreamName:           aws.String(name),
		StreamARN:            aws.String(fakeARNPrefix + name),
		RetentionPeriodHours: aws.Int32(24),
		StreamCreationTimestamp: func() *time.Time {
			if created.IsZero() {
				return nil
			}
			return aws.Time(created)
		}(),
	}}, nil
}

// ListShards pages two shards at a time, so discovery must paginate.
func (f *fakeKinesis) ListShards(_ context.Context, in *kinesis.ListShardsInput, _ ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id := range f.shards {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	start := 0
	if in.NextToken != nil {
		start, _ = strconv.Atoi(*in.NextToken)
	}
	end := min(start+2, len(ids))
	out := &kinesis.ListShardsOutput{}
	for _, id := range ids[start:end] {
		s := f.shards[id]
		sh := types.Shard{ShardId: aws.String(id), SequenceNumberRange: &types.SequenceNumberRange{StartingSequenceNumber: aws.String(seqOf(id, 0))}}
		if s.parent != "" {
			sh.ParentShardId = aws.String(s.parent)
		}
		if s.adjacent != "" {
			sh.AdjacentParentShardId = aws.String(s.adjacent)
		}
		sh.HashKeyRange = s.hashRange
		if s.closed {
			sh.SequenceNumberRange.EndingSequenceNumber = aws.String(seqOf(id, s.records))
		}
		out.Shards = append(out.Shards, sh)
	}
	if end < len(ids) {
		out.NextToken = aws.String(strconv.Itoa(end))
	}
	return out, nil
}

func (f *fakeKinesis) GetShardIterator(_ context.Context, in *kinesis.GetShardIteratorInput, _ ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.iterReqs = append(f.iterReqs, *in)
	id := aws.ToString(in.ShardId)
	s := f.shards[id]
	next := 1
	switch in.ShardIteratorType {
	case types.ShardIteratorTypeLatest:
		next = s.records + 1
	case types.ShardIteratorTypeAfterSequenceNumber:
		n, _ := strconv.Atoi(aws.ToString(in.StartingSequenceNumber))
		next = n%1000000 + 1
	case types.ShardIteratorTypeAtSequenceNumber:
		n, _ := strconv.Atoi(aws.ToString(in.StartingSequenceNumber))
		next = n % 1000000
	}
	return &kinesis.GetShardIteratorOutput{ShardIterator: aws.String(fmt.Sprintf("%s/%d", id, next))}, nil
}

func (f *fakeKinesis) GetRecords(_ context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, nextStr, _ := strings.Cut(aws.ToString(in.ShardIterator), "/")
	f.calls[id] = append(f.calls[id], time.Now())
	if f.limits == nil {
		f.limits = map[string][]int32{}
	}
	f.limits[id] = append(f.limits[id], aws.ToInt32(in.Limit))
	if err := f.getErrors[id]; err != nil {
		return nil, err
	}
	if f.throttle[id] > 0 {
		f.throttle[id]--
		return nil, &smithy.GenericAPIError{Code: kinesisx.CodeProvisionedThroughputExceeded, Message: "Rate exceeded for shard"}
	}
	if at, ok := f.expireAt[id]; ok && at == len(f.calls[id]) {
		return nil, &smithy.GenericAPIError{Code: kinesisx.CodeExpiredIterator, Message: "Iterator expired"}
	}
	s := f.shards[id]
	next, _ := strconv.Atoi(nextStr)
	out := &kinesis.GetRecordsOutput{MillisBehindLatest: aws.Int64(s.behind)}
	limit := int(aws.ToInt32(in.Limit))
	for next <= s.records && len(out.Records) < limit {
		data := []byte(fmt.Sprintf("%s/%d", id, next))
		if s.aggregate > 0 {
			var subs []kpl.Record
			for j := range s.aggregate {
				key := fmt.Sprintf("k%d", j)
				if s.memberKey != nil {
					key = s.memberKey(next, j)
				}
				member := []byte(fmt.Sprintf("%s/%d.%d", id, next, j))
				if len(member) < s.memberSize {
					member = append(member, make([]byte, s.memberSize-len(member))...)
				}
				subs = append(subs, kpl.Record{PartitionKey: key, Data: member})
			}
			data = kpl.Encode(subs)
		}
		key := "k"
		if s.keys > 0 {
			key = fmt.Sprintf("k%d", next%s.keys)
		}
		out.Records = append(out.Records, types.Record{
			SequenceNumber:              aws.String(seqOf(id, next)),
			PartitionKey:                aws.String(key),
			Data:                        data,
			ApproximateArrivalTimestamp: aws.Time(time.Now()),
		})
		next++
	}
	if s.closed && next > s.records {
		return out, nil
	}
	out.NextShardIterator = aws.String(fmt.Sprintf("%s/%d", id, next))
	return out, nil
}

// trim removes a shard as retention does: it is no longer listed and
// reading it answers ResourceNotFound.
func (f *fakeKinesis) trim(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.shards, id)
	f.getErrors[id] = &smithy.GenericAPIError{Code: kinesisx.CodeResourceNotFound, Message: "Shard " + id + " in stream s under account 000000000000 does not exist"}
}

func (f *fakeKinesis) callTimes(shard string) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.calls[shard]...)
}
