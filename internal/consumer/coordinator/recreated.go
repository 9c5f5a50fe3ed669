package coordinator

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/failsafe-go/failsafe-go"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// A stream deleted and created again under the same name keeps its ARN and,
// on AWS as on kinesis-mock, its shard ids: the group's checkpoints of the
// deleted stream would apply to the new one, whose sequence numbers differ,
// and Kinesis would refuse them for ever. The stream's creation time tells
// the two apart. The group record holds the creation time of the stream its
// state belongs to; when the stream exists with another one, the state of
// the deleted stream is cleared (Store.StreamCreated, once for the group)
// and the new stream's shards start at the group's start position. With
// enhanced fan-out the stream's consumer went with the deleted stream; it is
// resolved again (registered anew) before the next subscription.

// sameStream reports whether the shards just listed may be taken with the
// group's state. The stream is described again (one DescribeStreamSummary)
// only after discovery found it missing or a reader found it deleted or
// recreated (reader.go, notFound); the
// comparison in the store otherwise just records the creation time seen at
// start, once, which also catches a stream recreated while no instance ran.
// false means "not yet": the listing is not used and the check is made
// again at the next discovery.
func (co *coordinator) sameStream(ctx context.Context) bool {
	if co.created.IsZero() {
		return true // the endpoint gives no creation time (an emulator)
	}
	if !co.recheck && co.createdRecorded {
		return true
	}
	current := co.created
	if co.recheck {
		c, err := co.describeCreated(ctx)
		if err != nil {
			if ctx.Err() == nil {
				co.log.Warnf("Describing the stream again after it was missing failed; its shards are taken once it succeeds: %v", err)
			}
			return false
		}
		current = c
	}
	sctx, cancel := context.WithTimeout(ctx, co.c.cfg.LeasePeriod/3)
	defer cancel()
	cleared, err := co.store.StreamCreated(sctx, co.created, current)
	if errors.Is(err, consumer.ErrOlderStream) {
		// The listing this coordinator was made from (the group's, read
		// from Redis at start) was of the deleted stream: nothing was
		// cleared, and no shard is taken until a describe gives the
		// stream's own creation time.
		co.log.Infof("The stream was created again after the listing this instance found it in (that listing gave %v, the group's state is of a later stream); its shards are taken once the stream is described again",
			current.UTC().Format(time.RFC3339))
		co.recheck = true
		return false
	}
	if err != nil {
		if co.recheck && ctx.Err() == nil {
			co.log.Warnf("Checking whether the stream was recreated failed; its shards are taken once it succeeds: %v", err)
		}
		return !co.recheck
	}
	co.createdRecorded, co.recheck = true, false
	if cleared && co.found {
		// Followed streams come and go by design (follow.go): a stream
		// of a pattern created again is news, not an error.
		co.log.Infof("The stream was created again (now created at %v): the deleted stream's checkpoints and closed shards were cleared, and its shards start at %s", current.UTC().Format(time.RFC3339), co.start)
	} else if cleared {
		co.log.Errorf("The stream was deleted and created again (now created at %v; the group's checkpoints were of an earlier stream): the deleted stream's checkpoints and closed shards do not apply to it and were cleared, and its shards start at the group's start position (start_position, or the last checkpoints reset)",
			current.UTC().Format(time.RFC3339))
	} else if !current.Equal(co.created) {
		co.log.Infof("The stream was deleted and created again (now created at %v); another instance cleared the deleted stream's checkpoints", current.UTC().Format(time.RFC3339))
	}
	if !current.Equal(co.created) || cleared {
		co.forgetIncarnation()
		if co.fanOut != nil {
			// Deleting the stream deleted its consumers.
			co.fanOut.MarkStale()
		}
	}
	co.created = current
	co.createdSeen.Store(current.UnixNano())
	co.c.adoptCreated(co, current)
	return true
}

// recreatedSince reports, from any goroutine, whether the stream's creation
// time differs from the one the coordinator last compared: a stream
// deleted and created again between two listings, which discovery never
// saw missing. A failed describe, or an endpoint without creation times,
// reports false.
func (co *coordinator) recreatedSince(ctx context.Context) bool {
	known := co.createdSeen.Load()
	if known == 0 {
		return false
	}
	c, err := co.describeCreated(ctx)
	return err == nil && !c.IsZero() && c.UnixNano() != known
}

// forgetIncarnation drops what this instance knows of the deleted stream:
// its readers stop (their leases were freed and fenced) and nothing of it
// is re-seeded into a store that forgets the group later.
func (co *coordinator) forgetIncarnation() {
	for _, r := range co.readers {
		if !r.Stopping() {
			r.Stop()
		}
	}
	co.known.mu.Lock()
	co.known.closedSet, co.known.committed = nil, nil
	co.known.mu.Unlock()
}

// describeCreated returns the stream's creation time, within the
// process's describe limit.
func (co *coordinator) describeCreated(ctx context.Context) (time.Time, error) {
	in := &kinesis.DescribeStreamSummaryInput{}
	in.StreamName, in.StreamARN = kinesisx.StreamRef(co.configured)
	describe := kinesisx.RetryBuilder[*kinesis.DescribeStreamSummaryOutput](co.c.cfg.Backoff).Build()
	out, err := failsafe.With(describe).WithContext(ctx).Get(func() (*kinesis.DescribeStreamSummaryOutput, error) {
		// Every reader of a deleted stream asks at once, so each attempt
		// takes one of the process's describe permits.
		if err := co.c.acquireDescribe(ctx); err != nil {
			return nil, err
		}
		return co.api.DescribeStreamSummary(ctx, in)
	})
	if err != nil {
		return time.Time{}, err
	}
	return aws.ToTime(out.StreamDescriptionSummary.StreamCreationTimestamp), nil
}
