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

// streamCreatedScript: KEYS epoch, ckpt, closed, lease, handoff; ARGV seen,
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
var streamCreatedScript = newScript(`
local recorded = redis.call('HGET', KEYS[1], '` + streamCreatedField + `') or ARGV[1]
if recorded == ARGV[2] then
  redis.call('HSET', KEYS[1], '` + streamCreatedField + `', ARGV[2])
  return 0
end
local leases = redis.call('HGETALL', KEYS[4])
for i = 1, #leases, 2 do
  local _, _, tok = parse_lease(leases[i + 1])
  redis.call('HSET', KEYS[4], leases[i], lease_value('', 0, tok + 1))
end
local ckpt = redis.call('HKEYS', KEYS[2])
for _, f in ipairs(ckpt) do
  if string.sub(f, 1, 1) ~= '_' then redis.call('HDEL', KEYS[2], f) end
end
redis.call('DEL', KEYS[3], KEYS[5])
redis.call('HSET', KEYS[1], '` + streamCreatedField + `', ARGV[2])
return 1
`)

// StreamCreated compares the creation time of the stream as it exists now
// with the one the group's checkpoints belong to: the one recorded in the
// group record, or seen (what the caller saw before) when none is recorded
// yet. When they differ the stream was deleted and created anew under the
// same identity, and the group's checkpoints, closed shards, leases and
// hand-off requests of the deleted stream are cleared in one step, so its
// shards start at the group's start position; cleared is true for the one
// caller that did it. Leases are freed with their tokens bumped, so a
// reader of the deleted stream can commit nothing afterwards.
func (s *Store) StreamCreated(ctx context.Context, seen, current time.Time) (cleared bool, err error) {
	n, err := streamCreatedScript.Run(ctx, s.c.client,
		[]string{s.keys.Epoch, s.keys.Checkpoints, s.keys.Closed, s.keys.Leases, s.keys.Handoff},
		seen.UnixMilli(), current.UnixMilli()).Int64()
	if err != nil {
		return false, fmt.Errorf("comparing the stream's creation time with the group's: %w", err)
	}
	return n == 1, nil
}
