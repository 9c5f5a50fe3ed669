-- KEYS: members, closed, epoch, lease, handoff of one stream; ARGV:
-- periodMillis, the group record id the caller knows ('' to skip the
-- check), owner, the hand-off requests' max age (ms). What a balancing
-- round reads, in one call: {live members, closed shards, {now, shard,
-- lease...}, {shard, requester...}, when the store was last re-seeded (ms,
-- 0 for never), the shards a re-seed won back from a close and nobody
-- closed since (" a b ... ", reseed.lua), the provisional shards (" a b
-- ... ", reseed.lua)}, with live_members.lua's,
-- closed.lua's, leases.lua's and handoff_requests.lua's effects; FORGOT,
-- as closed.lua, when the caller's record is gone.
local now = now_ms()
local members = live_members(KEYS[1], ARGV[1], now)
if ARGV[2] ~= '' and not epoch_ok(KEYS[3], ARGV[2]) then return forgot(KEYS[3]) end
local closed = redis.call('SMEMBERS', KEYS[2])
return {members, closed, all_leases(KEYS[4], now), handoff_requests(KEYS[5], KEYS[4], KEYS[1], ARGV[3], ARGV[1], now, ARGV[4]),
  tonumber(redis.call('HGET', KEYS[3], '{{reseededField}}') or '0'),
  redis.call('HGET', KEYS[3], '{{reopenedField}}') or '', redis.call('HGET', KEYS[3], '{{provisionalField}}') or ''}
