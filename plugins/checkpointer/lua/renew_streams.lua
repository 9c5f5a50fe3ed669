-- KEYS: lease and epoch keys of several streams of one input, in pairs.
-- ARGV: owner, periodMillis, then per stream its known epoch, the number n
-- of its leases, and n shard, token pairs. Returns per stream
-- {1, expiresAt, now, lostShard...}, or {0, id} when the store forgot it
-- (id: the group record it holds, '' when gone). One call for every
-- stream, where renew_all.lua is one per stream: only a Redis that is not
-- a Cluster takes it.
local res = {}
local a = 3
for k = 1, #KEYS, 2 do
  local known, n = ARGV[a], tonumber(ARGV[a + 1])
  local from, to = a + 2, a + 1 + 2 * n
  local out = renew_leases(KEYS[k], KEYS[k + 1], ARGV[1], ARGV[2], known, ARGV, from, to)
  if out then
    table.insert(out, 1, 1)
    res[#res + 1] = out
  else
    res[#res + 1] = {0, redis.call('HGET', KEYS[k + 1], 'id') or ''}
  end
  a = to + 1
end
return res
