-- KEYS: members, closed, epoch, lease, handoff, progress of each of
-- several streams of one input (six keys a stream, in that order); ARGV:
-- periodMillis, owner, '1' to read the published progress too (for the
-- loads) or '', the hand-off requests' max age (ms), then the group record
-- id the caller knows of each stream ('' to skip the check). Per stream,
-- {1, what round.lua returns but the provisional shards, the progress hash
-- as HGETALL gives it ({} unless asked), the provisional shards} with round.lua's effects, or {0, the id the record holds
-- ('' when gone)} when the record is gone or replaced. One call for every
-- stream an instance reads, where round.lua is one per stream: only a
-- Redis that is not a Cluster takes it, since each stream's keys have a
-- slot of their own there.
local now = now_ms()
local r = {}
for i = 1, #KEYS / 6 do
  local k = (i - 1) * 6
  local members = live_members(KEYS[k + 1], ARGV[1], now)
  local known = ARGV[4 + i]
  if known ~= '' and not epoch_ok(KEYS[k + 3], known) then
    r[i] = {0, redis.call('HGET', KEYS[k + 3], 'id') or ''}
  else
    local progress = {}
    if ARGV[3] == '1' then progress = redis.call('HGETALL', KEYS[k + 6]) end
    r[i] = {1, members, redis.call('SMEMBERS', KEYS[k + 2]), all_leases(KEYS[k + 4], now),
      handoff_requests(KEYS[k + 5], KEYS[k + 4], KEYS[k + 1], ARGV[2], ARGV[1], now, ARGV[4]),
      tonumber(redis.call('HGET', KEYS[k + 3], '{{reseededField}}') or '0'),
      redis.call('HGET', KEYS[k + 3], '{{reopenedField}}') or '', progress,
      redis.call('HGET', KEYS[k + 3], '{{provisionalField}}') or ''}
  end
end
return r
