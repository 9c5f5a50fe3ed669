package kinesisx

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/failsafe-go/failsafe-go"
)

// ListShardsAPI is the part of the Kinesis client that lists shards.
type ListShardsAPI interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
}

// IsARN reports whether a configured stream is an ARN rather than a name.
func IsARN(stream string) bool { return strings.HasPrefix(stream, "arn:") }

// StreamName returns the name of a stream configured by name or by ARN
// (`arn:aws:kinesis:<region>:<account>:stream/<name>`), as metrics label it.
func StreamName(stream string) string {
	if _, name, ok := strings.Cut(stream, ":stream/"); ok && IsARN(stream) {
		return name
	}
	return stream
}

// StreamRef returns the stream name and ARN parameters for a stream as the
// user configured it: exactly one of them is set. Requests name the stream
// the way the user did, because some emulators reject StreamARN and some
// IAM policies are written against one form only.
func StreamRef(stream string) (name, arn *string) {
	if IsARN(stream) {
		return nil, aws.String(stream)
	}
	return aws.String(stream), nil
}

// ListAllShards lists every shard of a stream (open and closed), following
// NextToken to the last page. Each page is fetched through the given
// failsafe-go policies, if any, so a failed page is retried rather than
// returning a partial listing; an error means no listing at all.
func ListAllShards(ctx context.Context, api ListShardsAPI, stream string, policies ...failsafe.Policy[*kinesis.ListShardsOutput]) ([]types.Shard, error) {
	in := &kinesis.ListShardsInput{}
	in.StreamName, in.StreamARN = StreamRef(stream)
	var shards []types.Shard
	for {
		page := in
		call := func() (*kinesis.ListShardsOutput, error) { return api.ListShards(ctx, page) }
		var (
			out *kinesis.ListShardsOutput
			err error
		)
		if len(policies) == 0 {
			out, err = call()
		} else {
			out, err = failsafe.With(policies...).WithContext(ctx).Get(call)
		}
		if err != nil {
			return nil, fmt.Errorf("listing shards of stream %s: %w", stream, err)
		}
		shards = append(shards, out.Shards...)
		if aws.ToString(out.NextToken) == "" {
			return shards, nil
		}
		// A page after the first names only the token.
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}
