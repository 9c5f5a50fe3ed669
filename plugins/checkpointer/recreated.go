package checkpointer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// streamCreatedField is the field of the group record (the epoch hash) that
// holds the creation time, in milliseconds, of the stream incarnation the
// group's checkpoints belong to.
const streamCreatedField = "stream_created"

// streamCreatedScript: KEYS epoch, ckpt, closed, lease, handoff; ARGV seen,
// current (creation times in ms). The recorded creation time, or the
// caller's seen one when none is recorded, is compared with current. Equal:
// current is recorded and 0 returned. Earlier: the caller saw a deleted
// incarnation, and -1 is returned with nothing changed. (It is recorded before the group's
// first take too: the other scripts look at the record's id only.) Different:
// the stream was recreated, so in one step every checkpoint and the closed
// set are deleted (the start override stays: shards begin at the group's
// start), hand-off requests dropped and every lease freed with its token
// bumped (a reader still holding one is fenced out of its next commit or
// renewal), current is recorded and 1 returned. An instance that comes
// second finds current recorded and returns 0: one instance clears. The
// redelivery marks stay (StreamCreated says why).
var streamCreatedScript = newScript("stream_created")

// StreamCreated compares the creation time of the stream as it exists now
// with the one the group's checkpoints belong to: the one recorded in the
// group record, or seen (what the caller saw before) when none is recorded
// yet. When current is later the stream was deleted and created anew under the
// same identity, and the group's checkpoints, closed shards, leases and
// hand-off requests of the deleted stream are cleared in one step, so its
// shards start at the group's start position; cleared is true for the one
// caller that did it. Leases are freed with their tokens bumped, so a
// reader of the deleted stream can commit nothing afterwards.
//
// The redelivery marks are kept. A reader may already have read, and
// delivered, records of the new stream under the deleted one's creation
// time: an instance that starts between a deletion and the group's next
// listing takes the creation time from the listing in Redis, and the
// shards it reads by name are the new stream's. Once the new creation time
// is seen, the state is cleared and those records are read again from the
// start; with the marks cleared they would come again unmarked (soak seed
// 3, 1 h: a17 delivered 195 records of soak-dyn-3's sixth incarnation
// twice within a second). A mark left from the deleted stream may mark a
// record of the new one that was not delivered before, which the mark's
// promise allows (it is one-sided): a false mark costs a downstream check,
// a missing one a duplicate it cannot see.
//
// When current is earlier than the recorded time, the caller saw a
// deleted incarnation (a stream listing made before the stream was
// created again, which an instance starting then reads from Redis):
// nothing is cleared, and the error is consumer.ErrOlderStream. Clearing
// then would throw away the new stream's checkpoints, and the instances
// that know the new time would clear again on seeing the old one recorded
// (soak seed 5, 1 h: b33 started with soak-dyn-3's previous creation
// time, and 60 records of the new stream were read again by two
// instances).
func (s *Store) StreamCreated(ctx context.Context, seen, current time.Time) (cleared bool, err error) {
	n, err := streamCreatedScript.Run(ctx, s.c.client,
		[]string{s.keys.Epoch, s.keys.Checkpoints, s.keys.Closed, s.keys.Leases, s.keys.Handoff},
		seen.UnixMilli(), current.UnixMilli()).Int64()
	if err != nil {
		return false, fmt.Errorf("comparing the stream's creation time with the group's: %w", err)
	}
	if n < 0 {
		return false, fmt.Errorf("comparing the stream's creation time %v with the group's: %w", current.UTC().Format(time.RFC3339), consumer.ErrOlderStream)
	}
	return n == 1, nil
}

// RecordedStreamCreated returns the creation time of the stream incarnation
// the group's checkpoints belong to, as StreamCreated recorded it (zero
// when none is recorded). It changes when an instance finds the stream
// deleted and created again and clears the group's state, which moves
// checkpoints back by design; the soak's checkpoint check reads it so as to
// tell that clear from a regression.
func (s *Store) RecordedStreamCreated(ctx context.Context) (time.Time, error) {
	v, err := s.c.client.HGet(ctx, s.keys.Epoch, streamCreatedField).Result()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the creation time the group's checkpoints belong to: %w", err)
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the creation time the group's checkpoints belong to: %q is not milliseconds", v)
	}
	return time.UnixMilli(ms), nil
}
