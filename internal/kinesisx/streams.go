package kinesisx

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/failsafe-go/failsafe-go"
)

// Account-wide limits of the calls that find streams (AWS documentation:
// each is counted per account and region, across every caller).
const (
	// MaxListStreamsPerSecond bounds ListStreams.
	MaxListStreamsPerSecond = 5
	// MaxListTagsForStreamPerSecond bounds ListTagsForStream.
	MaxListTagsForStreamPerSecond = 5
	// MaxDescribeStreamSummaryPerSecond bounds DescribeStreamSummary.
	MaxDescribeStreamSummaryPerSecond = 20
	// MaxListStreamsLimit is the most streams one ListStreams page holds.
	MaxListStreamsLimit = 100
)

// ListStreamsAPI is the part of the Kinesis client that lists streams.
type ListStreamsAPI interface {
	ListStreams(ctx context.Context, in *kinesis.ListStreamsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListStreamsOutput, error)
}

// ListedStream is one stream of a ListStreams listing. ARN, Created and
// Status are set when the service answers with StreamSummaries (AWS); an
// endpoint that answers with names only (kinesis-mock, kinesalite) leaves
// them empty, for the caller to describe the streams it keeps.
type ListedStream struct {
	Name    string
	ARN     string
	Created time.Time
	Status  types.StreamStatus
}

// ListAllStreams lists every stream of the account and region, following
// the pages to the last. A page names the next by NextToken where the
// service gives one, else (HasMoreStreams without a token, as the
// emulators and older endpoints answer) by ExclusiveStartStreamName, the
// last name listed: the SDK's paginator follows NextToken only and would
// stop after the first page there. Each page is fetched through the
// given failsafe-go policies, if any (a rate limiter belongs inside the
// retry, so every attempt takes a permit); an error means no listing at
// all, never a partial one.
func ListAllStreams(ctx context.Context, api ListStreamsAPI, policies ...failsafe.Policy[*kinesis.ListStreamsOutput]) ([]ListedStream, error) {
	in := &kinesis.ListStreamsInput{Limit: aws.Int32(MaxListStreamsLimit)}
	var out []ListedStream
	for page := 1; ; page++ {
		req := in
		call := func() (*kinesis.ListStreamsOutput, error) { return api.ListStreams(ctx, req) }
		var (
			res *kinesis.ListStreamsOutput
			err error
		)
		if len(policies) == 0 {
			res, err = call()
		} else {
			res, err = failsafe.With(policies...).WithContext(ctx).Get(call)
		}
		if err != nil {
			return nil, fmt.Errorf("listing streams (page %d): %w", page, err)
		}
		out = appendListed(out, res)
		switch {
		case aws.ToString(res.NextToken) != "":
			// A page after the first names only the token.
			in = &kinesis.ListStreamsInput{NextToken: res.NextToken}
		case aws.ToBool(res.HasMoreStreams) && len(res.StreamNames) > 0:
			in = &kinesis.ListStreamsInput{Limit: aws.Int32(MaxListStreamsLimit), ExclusiveStartStreamName: aws.String(res.StreamNames[len(res.StreamNames)-1])}
		default:
			return out, nil
		}
	}
}

// appendListed adds a page's streams: its summaries where it has them, its
// names otherwise (and any name a summary lacks).
func appendListed(out []ListedStream, res *kinesis.ListStreamsOutput) []ListedStream {
	summarised := make(map[string]bool, len(res.StreamSummaries))
	for _, s := range res.StreamSummaries {
		name := aws.ToString(s.StreamName)
		summarised[name] = true
		out = append(out, ListedStream{Name: name, ARN: aws.ToString(s.StreamARN), Created: aws.ToTime(s.StreamCreationTimestamp), Status: s.StreamStatus})
	}
	for _, name := range res.StreamNames {
		if !summarised[name] {
			out = append(out, ListedStream{Name: name})
		}
	}
	return out
}
