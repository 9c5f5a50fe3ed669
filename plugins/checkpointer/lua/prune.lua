-- Every entry of the shards ARGV[2..] names goes, in every key, unless the
-- shard's lease is live: a reader may still drain it, and a release or close
-- needs the lease it holds. The caller names only shards the stream no
-- longer lists (the gate counts those as closed, so their closed marks are
-- no longer needed). Returns the shards pruned.
if ARGV[1] ~= '' and not epoch_ok(KEYS[1], ARGV[1]) then return forgot(KEYS[1]) end
local now = now_ms()
local out = {}
for i = 2, #ARGV do
  local shard = ARGV[i]
  local owner, exp = parse_lease(redis.call('HGET', KEYS[4], shard))
  if not live(owner, exp, now) then
    redis.call('HDEL', KEYS[2], shard)
    redis.call('SREM', KEYS[3], shard)
    redis.call('HDEL', KEYS[4], shard)
    redis.call('HDEL', KEYS[5], shard)
    redis.call('HDEL', KEYS[6], shard)
    table.insert(out, shard)
  end
end
return out
