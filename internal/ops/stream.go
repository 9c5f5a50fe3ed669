package ops

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/failsafe-go/failsafe-go"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// kinesisAPI is the part of the Kinesis client the operator commands use.
type kinesisAPI interface {
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, opts ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, opts ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	// GetShardIterator and GetRecords check an import's positions.
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, opts ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

// operatorBackoff keeps an operator command from hanging for long on a
// throttled or unreachable service.
var operatorBackoff = kinesisx.Backoff{
	MaxRetries:      4,
	InitialInterval: 200 * time.Millisecond,
	MaxInterval:     2 * time.Second,
	MaxElapsedTime:  10 * time.Second,
}

// ErrStreamNotFound: the stream does not exist in the region.
var ErrStreamNotFound = errors.New("stream not found")

// streamInfo is what the operator commands need to know about a stream.
type streamInfo struct {
	// ID names the keys: the ARN, or the name when the service gives none.
	ID     string
	Name   string
	Shards []types.Shard
	// Created is when the stream was created (zero when unknown).
	Created time.Time
}

// streamShard is a listed shard as the gate sees it.
type streamShard struct {
	ID      string
	Parents []string
	// Closed: the shard has an ending sequence number (split or merged).
	Closed bool
}

// shards returns the listed shards with their parents, in listing order.
func (i streamInfo) shards() []streamShard {
	out := make([]streamShard, 0, len(i.Shards))
	for _, sh := range i.Shards {
		s := streamShard{ID: aws.ToString(sh.ShardId)}
		for _, p := range []*string{sh.ParentShardId, sh.AdjacentParentShardId} {
			if aws.ToString(p) != "" {
				s.Parents = append(s.Parents, *p)
			}
		}
		if r := sh.SequenceNumberRange; r != nil && aws.ToString(r.EndingSequenceNumber) != "" {
			s.Closed = true
		}
		out = append(out, s)
	}
	return out
}

// account is the AWS account in the stream's ARN, "" without an ARN.
func (i streamInfo) account() string {
	// arn:aws:kinesis:<region>:<account>:stream/<name>
	parts := strings.SplitN(i.ID, ":", 6)
	if len(parts) == 6 && parts[0] == "arn" {
		return parts[4]
	}
	return ""
}

// listed is the set of shard ids the stream lists.
func (i streamInfo) listed() map[string]bool {
	listed := make(map[string]bool, len(i.Shards))
	for _, sh := range i.Shards {
		listed[*sh.ShardId] = true
	}
	return listed
}

// describeStream resolves the stream's identity (its ARN, as the input does
// at connect) and lists every shard, following ListShards pages. A stream
// given by name is always sent as StreamName, which kinesalite needs.
func describeStream(ctx context.Context, api kinesisAPI, stream string) (streamInfo, error) {
	info := streamInfo{Name: stream}
	in := &kinesis.DescribeStreamSummaryInput{}
	in.StreamName, in.StreamARN = kinesisx.StreamRef(stream)
	summary, err := failsafe.With(kinesisx.RetryBuilder[*kinesis.DescribeStreamSummaryOutput](operatorBackoff).Build()).
		WithContext(ctx).Get(func() (*kinesis.DescribeStreamSummaryOutput, error) {
		return api.DescribeStreamSummary(ctx, in)
	})
	if err != nil {
		var nf *types.ResourceNotFoundException
		if errors.As(err, &nf) {
			return info, fmt.Errorf("describing stream %s: %w", stream, ErrStreamNotFound)
		}
		return info, fmt.Errorf("describing stream %s: %w", stream, err)
	}
	info.ID = stream
	if d := summary.StreamDescriptionSummary; d != nil {
		if d.StreamName != nil {
			info.Name = *d.StreamName
		}
		if d.StreamARN != nil && *d.StreamARN != "" {
			info.ID = *d.StreamARN
		}
		info.Created = aws.ToTime(d.StreamCreationTimestamp)
	}

	shards, err := kinesisx.ListAllShards(ctx, api, stream, kinesisx.RetryBuilder[*kinesis.ListShardsOutput](operatorBackoff).Build())
	if err != nil {
		return info, err
	}
	info.Shards = shards
	return info, nil
}
