package streams

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/failsafe-go/failsafe-go"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// API is the part of the Kinesis client the Lister calls.
type API interface {
	kinesisx.ListStreamsAPI
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
	ListTagsForStream(ctx context.Context, in *kinesis.ListTagsForStreamInput, optFns ...func(*kinesis.Options)) (*kinesis.ListTagsForStreamOutput, error)
}

// Identity is one stream found: an incarnation of a stream, told apart
// from an earlier one of the same name (deleted and created again, same
// ARN) by its creation time.
type Identity struct {
	Name string
	// ARN names the stream's Redis keys (the name where the service
	// gives no ARN).
	ARN     string
	Created time.Time
	Status  types.StreamStatus
}

// Key is what the group's Redis keys of the stream are named after.
func (i Identity) Key() string {
	if i.ARN != "" {
		return i.ARN
	}
	return i.Name
}

// Incarnation is the stream's identity with its creation time,
// "<ARN>@<creation ms>": two incarnations of one name differ here.
func (i Identity) Incarnation() string {
	return i.Key() + "@" + strconv.FormatInt(i.Created.UnixMilli(), 10)
}

// Readable reports whether the stream's shards can be read: ACTIVE, or
// UPDATING (a reshard or a change of mode in progress). A CREATING stream
// is read from the next listing that finds it ACTIVE; a DELETING one is
// gone.
func (i Identity) Readable() bool {
	return i.Status == types.StreamStatusActive || i.Status == types.StreamStatusUpdating
}

// Lister finds the streams matching Rules. Its calls stay within the
// account-wide limits of each API (ListStreams and ListTagsForStream
// 5/s, DescribeStreamSummary 20/s) through paces (kinesisx.Pace) shared
// by every listing of this Lister, inside the retry policy so a retried
// call waits for a permit too. Other callers in the account
// (other groups, other tools) count against the same limits: the
// classifier retries the throttling they cause.
type Lister struct {
	api     API
	backoff kinesisx.Backoff

	listLimit, tagsLimit, describeLimit *kinesisx.Pace
}

// NewLister returns a Lister over api whose calls retry with backoff.
func NewLister(api API, backoff kinesisx.Backoff) *Lister {
	return &Lister{
		api:           api,
		backoff:       backoff,
		listLimit:     kinesisx.NewPace(kinesisx.MaxListStreamsPerSecond),
		tagsLimit:     kinesisx.NewPace(kinesisx.MaxListTagsForStreamPerSecond),
		describeLimit: kinesisx.NewPace(kinesisx.MaxDescribeStreamSummaryPerSecond),
	}
}

// permitted wraps a call so that every attempt first waits for a permit.
func permitted[R any](ctx context.Context, limit *kinesisx.Pace, call func() (R, error)) func() (R, error) {
	return func() (R, error) {
		if err := limit.Wait(ctx); err != nil {
			var zero R
			return zero, err
		}
		return call()
	}
}

// List returns, sorted by name, the streams whose name matches a pattern
// of the rules and whose tags carry the rules' tags, in any status (see
// Identity.Readable). A stream deleted while it is listed is left out. An
// error means no result: the caller keeps the last one.
func (l *Lister) List(ctx context.Context, r Rules) ([]Identity, error) {
	if !r.Dynamic() {
		return nil, nil
	}
	listed, err := kinesisx.ListAllStreams(ctx, permittedAPI{l}, kinesisx.RetryBuilder[*kinesis.ListStreamsOutput](l.backoff).Build())
	if err != nil {
		return nil, err
	}
	var out []Identity
	for _, s := range listed {
		if !r.MatchName(s.Name) {
			continue
		}
		id := Identity{Name: s.Name, ARN: s.ARN, Created: s.Created, Status: s.Status}
		if id.ARN == "" || id.Created.IsZero() || id.Status == "" {
			// Names only (the emulators): describe the few that match.
			if id, err = l.describe(ctx, s.Name); err != nil {
				if gone(err) {
					continue
				}
				return nil, err
			}
		}
		if len(r.Tags) > 0 {
			tags, err := l.tags(ctx, s.Name)
			if err != nil {
				if gone(err) {
					continue
				}
				return nil, err
			}
			if !r.MatchTags(tags) {
				continue
			}
		}
		out = append(out, id)
	}
	slices.SortFunc(out, func(a, b Identity) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// permittedAPI is the ListStreams of a Lister's client behind its rate
// limiter.
type permittedAPI struct{ l *Lister }

func (p permittedAPI) ListStreams(ctx context.Context, in *kinesis.ListStreamsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListStreamsOutput, error) {
	return permitted(ctx, p.l.listLimit, func() (*kinesis.ListStreamsOutput, error) {
		return p.l.api.ListStreams(ctx, in, optFns...)
	})()
}

// describe reads one stream's identity. The stream is named by name:
// ListStreams gives names, and kinesalite refuses ARNs.
func (l *Lister) describe(ctx context.Context, name string) (Identity, error) {
	in := &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)}
	policy := kinesisx.RetryBuilder[*kinesis.DescribeStreamSummaryOutput](l.backoff).Build()
	out, err := failsafe.With(policy).WithContext(ctx).Get(permitted(ctx, l.describeLimit, func() (*kinesis.DescribeStreamSummaryOutput, error) {
		return l.api.DescribeStreamSummary(ctx, in)
	}))
	if err != nil {
		return Identity{}, fmt.Errorf("describing stream %s: %w", name, err)
	}
	d := out.StreamDescriptionSummary
	if d == nil {
		return Identity{}, fmt.Errorf("describing stream %s: the answer holds no description", name)
	}
	return Identity{Name: name, ARN: aws.ToString(d.StreamARN), Created: aws.ToTime(d.StreamCreationTimestamp), Status: d.StreamStatus}, nil
}

// tags reads every tag of one stream, following HasMoreTags. By name, as
// describe.
func (l *Lister) tags(ctx context.Context, name string) (map[string]string, error) {
	tags := map[string]string{}
	in := &kinesis.ListTagsForStreamInput{StreamName: aws.String(name)}
	policy := kinesisx.RetryBuilder[*kinesis.ListTagsForStreamOutput](l.backoff).Build()
	for {
		req := in
		out, err := failsafe.With(policy).WithContext(ctx).Get(permitted(ctx, l.tagsLimit, func() (*kinesis.ListTagsForStreamOutput, error) {
			return l.api.ListTagsForStream(ctx, req)
		}))
		if err != nil {
			return nil, fmt.Errorf("listing the tags of stream %s: %w", name, err)
		}
		for _, t := range out.Tags {
			tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
		if !aws.ToBool(out.HasMoreTags) || len(out.Tags) == 0 {
			return tags, nil
		}
		in = &kinesis.ListTagsForStreamInput{StreamName: aws.String(name), ExclusiveStartTagKey: out.Tags[len(out.Tags)-1].Key}
	}
}

// gone reports a stream deleted between the listing and a call about it.
func gone(err error) bool {
	var nf *types.ResourceNotFoundException
	return errors.As(err, &nf) || kinesisx.ErrorCode(err) == kinesisx.CodeResourceNotFound
}
