package checkpointer

import (
	"context"
	"fmt"
	"time"
)

// streamCreatedField is the field of the group record (the epoch hash) that
// holds the creation time, in milliseconds, of the stream incarnation the
// group's checkpoints belong to.
const streamCreatedField = "stream_created"

// streamCreatedScript: KEYS epoch, ckpt, closed, lease, handoff, delivered; ARGV seen,
// current (creation times in ms). The recorded creation time, or the
// caller's seen one when none is recorded, is compared with current. Equal:
// current is recorded and 0 returned. (It is recorded before the group's
// first take too: the other scripts look at the record's id only.) Different:
// the stream was recreated, so in one step every checkpoint and the closed
// set are deleted (the start override stays: shards begin at the group's
// start), hand-off requests dropped and every lease freed with its token
// bumped (a reader still holding one is fenced out of its next commit or
// renewal), current is recorded and 1 returned. An instance that comes
// second finds current recorded and returns 0: one instance clears.
var streamCreatedScript = newScript("stream_created")

// StreamCreated compares the creation time of the stream as it exists now
// with the one the group's checkpoints belong to: the one recorded in the
// group record, or seen (what the caller saw before) when none is recorded
// yet. When they differ the stream was deleted and created anew under the
// same identity, and the group's checkpoints, closed shards, leases,
// hand-off requests and redelivery marks of the deleted stream are cleared
// in one step, so its
// shards start at the group's start position; cleared is true for the one
// caller that did it. Leases are freed with their tokens bumped, so a
// reader of the deleted stream can commit nothing afterwards.
func (s *Store) StreamCreated(ctx context.Context, seen, current time.Time) (cleared bool, err error) {
	n, err := streamCreatedScript.Run(ctx, s.c.client,
		[]string{s.keys.Epoch, s.keys.Checkpoints, s.keys.Closed, s.keys.Leases, s.keys.Handoff, s.keys.Delivered},
		seen.UnixMilli(), current.UnixMilli()).Int64()
	if err != nil {
		return false, fmt.Errorf("comparing the stream's creation time with the group's: %w", err)
	}
	if n == 1 {
		// The marks were of the deleted stream's records.
		s.marks.clear()
	}
	return n == 1, nil
}
