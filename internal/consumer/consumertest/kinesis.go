package consumertest

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

// KinesisShard is a shard of fakeKinesis: records numbered from 1.
type KinesisShard struct {
	Parent, Adjacent string
	Records          int
	Closed           bool
	// Aggregate > 0 makes every record a KPL aggregate of that many user
	// Records with data "<shard>/<i>.<j>".
	Aggregate int
	// Behind is the MillisBehindLatest every response reports.
	Behind int64
	// Keys > 0 gives record i the partition key "k<i mod keys>"; without
	// it every plain record has the key "k".
	Keys int
	// HashRange is listed as the shard's HashKeyRange when set.
	HashRange *types.HashKeyRange
	// MemberKey, when set, is the partition key of user record j of
	// Aggregate i (else "k<j>").
	MemberKey func(i, j int) string
	// Arrival, when set, is the arrival time of record i (else the time
	// of the GetRecords call).
	Arrival func(i int) time.Time
	// MemberSize > 0 pads the data of every user record of an aggregate
	// to that many bytes.
	MemberSize int
}

// Kinesis serves shards whose record i has sequence number
// <shard number>*1e6+i and data "<shard>/<i>". Iterators are
// "<shard>/<next index>".
type Kinesis struct {
	Mu        sync.Mutex
	Shards    map[string]*KinesisShard
	Calls     map[string][]time.Time // GetRecords call times per shard
	Limits    map[string][]int32     // GetRecords Limits per shard
	IterReqs  []kinesis.GetShardIteratorInput
	ExpireAt  map[string]int // shard -> GetRecords call number that answers ExpiredIterator once
	GetErrors map[string]error
	// Throttle makes the next n GetRecords calls of a shard fail with
	// ProvisionedThroughputExceeded.
	Throttle map[string]int
	// Created is the stream's creation time DescribeStreamSummary gives
	// (none when zero).
	Created time.Time
}

func NewKinesis() *Kinesis {
	return &Kinesis{Shards: map[string]*KinesisShard{}, Calls: map[string][]time.Time{}, ExpireAt: map[string]int{}, GetErrors: map[string]error{}, Throttle: map[string]int{}}
}

func (f *Kinesis) Add(id string, s *KinesisShard) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Shards[id] = s
}

func ShardNum(id string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "shardId-"))
	return n
}

func SeqOf(shard string, i int) string { return strconv.Itoa(ShardNum(shard)*1000000 + i) }

const FakeARNPrefix = "arn:aws:kinesis:us-east-1:000000000000:stream/"

func (f *Kinesis) DescribeStreamSummary(_ context.Context, in *kinesis.DescribeStreamSummaryInput, _ ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	f.Mu.Lock()
	created := f.Created
	f.Mu.Unlock()
	name := aws.ToString(in.StreamName)
	if in.StreamARN != nil {
		name = strings.TrimPrefix(aws.ToString(in.StreamARN), FakeARNPrefix)
	}
	return &kinesis.DescribeStreamSummaryOutput{StreamDescriptionSummary: &types.StreamDescriptionSummary{
		StreamName:           aws.String(name),
		StreamARN:            aws.String(FakeARNPrefix + name),
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
func (f *Kinesis) ListShards(_ context.Context, in *kinesis.ListShardsInput, _ ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	var ids []string
	for id := range f.Shards {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	start := 0
	if in.NextToken != nil {
		start, _ = strconv.Atoi(*in.NextToken)
	}
	if start > len(ids) {
		// A token of a listing the shards changed under (the stream
		// deleted and created again between two pages): Kinesis no
		// longer knows it either.
		return nil, &types.ExpiredNextTokenException{Message: aws.String("The NextToken is of a listing of another stream incarnation")}
	}
	end := min(start+2, len(ids))
	out := &kinesis.ListShardsOutput{}
	for _, id := range ids[start:end] {
		s := f.Shards[id]
		sh := types.Shard{ShardId: aws.String(id), SequenceNumberRange: &types.SequenceNumberRange{StartingSequenceNumber: aws.String(SeqOf(id, 0))}}
		if s.Parent != "" {
			sh.ParentShardId = aws.String(s.Parent)
		}
		if s.Adjacent != "" {
			sh.AdjacentParentShardId = aws.String(s.Adjacent)
		}
		sh.HashKeyRange = s.HashRange
		if s.Closed {
			sh.SequenceNumberRange.EndingSequenceNumber = aws.String(SeqOf(id, s.Records))
		}
		out.Shards = append(out.Shards, sh)
	}
	if end < len(ids) {
		out.NextToken = aws.String(strconv.Itoa(end))
	}
	return out, nil
}

func (f *Kinesis) GetShardIterator(_ context.Context, in *kinesis.GetShardIteratorInput, _ ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.IterReqs = append(f.IterReqs, *in)
	id := aws.ToString(in.ShardId)
	s := f.Shards[id]
	next := 1
	switch in.ShardIteratorType {
	case types.ShardIteratorTypeLatest:
		next = s.Records + 1
	case types.ShardIteratorTypeAfterSequenceNumber:
		n, _ := strconv.Atoi(aws.ToString(in.StartingSequenceNumber))
		next = n%1000000 + 1
	case types.ShardIteratorTypeAtSequenceNumber:
		n, _ := strconv.Atoi(aws.ToString(in.StartingSequenceNumber))
		next = n % 1000000
	}
	return &kinesis.GetShardIteratorOutput{ShardIterator: aws.String(fmt.Sprintf("%s/%d", id, next))}, nil
}

func (f *Kinesis) GetRecords(_ context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	id, nextStr, _ := strings.Cut(aws.ToString(in.ShardIterator), "/")
	f.Calls[id] = append(f.Calls[id], time.Now())
	if f.Limits == nil {
		f.Limits = map[string][]int32{}
	}
	f.Limits[id] = append(f.Limits[id], aws.ToInt32(in.Limit))
	if err := f.GetErrors[id]; err != nil {
		return nil, err
	}
	if f.Throttle[id] > 0 {
		f.Throttle[id]--
		return nil, &smithy.GenericAPIError{Code: kinesisx.CodeProvisionedThroughputExceeded, Message: "Rate exceeded for shard"}
	}
	if at, ok := f.ExpireAt[id]; ok && at == len(f.Calls[id]) {
		return nil, &smithy.GenericAPIError{Code: kinesisx.CodeExpiredIterator, Message: "Iterator expired"}
	}
	s := f.Shards[id]
	if s == nil {
		// A shard the test never added (a coordinator test that takes a
		// listed shard without giving it records): Kinesis knows no such
		// shard.
		return nil, &smithy.GenericAPIError{Code: kinesisx.CodeResourceNotFound, Message: "Shard " + id + " in stream s under account 000000000000 does not exist"}
	}
	next, _ := strconv.Atoi(nextStr)
	out := &kinesis.GetRecordsOutput{MillisBehindLatest: aws.Int64(s.Behind)}
	limit := int(aws.ToInt32(in.Limit))
	for next <= s.Records && len(out.Records) < limit {
		data := []byte(fmt.Sprintf("%s/%d", id, next))
		if s.Aggregate > 0 {
			var subs []kpl.Record
			for j := range s.Aggregate {
				key := fmt.Sprintf("k%d", j)
				if s.MemberKey != nil {
					key = s.MemberKey(next, j)
				}
				member := []byte(fmt.Sprintf("%s/%d.%d", id, next, j))
				if len(member) < s.MemberSize {
					member = append(member, make([]byte, s.MemberSize-len(member))...)
				}
				subs = append(subs, kpl.Record{PartitionKey: key, Data: member})
			}
			data = kpl.Encode(subs)
		}
		key := "k"
		if s.Keys > 0 {
			key = fmt.Sprintf("k%d", next%s.Keys)
		}
		arrival := time.Now()
		if s.Arrival != nil {
			arrival = s.Arrival(next)
		}
		out.Records = append(out.Records, types.Record{
			SequenceNumber:              aws.String(SeqOf(id, next)),
			PartitionKey:                aws.String(key),
			Data:                        data,
			ApproximateArrivalTimestamp: aws.Time(arrival),
		})
		next++
	}
	if s.Closed && next > s.Records {
		return out, nil
	}
	out.NextShardIterator = aws.String(fmt.Sprintf("%s/%d", id, next))
	return out, nil
}

// Trim removes a shard as retention does: it is no longer listed and
// reading it answers ResourceNotFound.
func (f *Kinesis) Trim(id string) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	delete(f.Shards, id)
	f.GetErrors[id] = &smithy.GenericAPIError{Code: kinesisx.CodeResourceNotFound, Message: "Shard " + id + " in stream s under account 000000000000 does not exist"}
}

func (f *Kinesis) CallTimes(shard string) []time.Time {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return append([]time.Time(nil), f.Calls[shard]...)
}
