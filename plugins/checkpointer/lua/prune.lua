-- Every entry of the shards ARGV[2..] names goes, in every key, unless the
-- shard's lease is live: a reader may still drain it, and a release or close
-- needs the lease it holds. The caller names only shards the stream no
-- longer lists (the gate counts those as closed, so their closed marks are
-- no longer needed). Each shard's own start (from an import or reset) goes
-- too. The shards pruned are noted in the group record (a bounded list), so
-- that a holder paused past its lease whose lease was pruned meanwhile is
-- told it lost the lease, not that the store forgot the group, and no
-- re-seed writes their entries back. Returns the shards pruned.
if ARGV[1] ~= '' and not epoch_ok(KEYS[1], ARGV[1]) then return forgot(KEYS[1]) end
local now = now_ms()
local out = {}
for i = 2, #ARGV do
  local shard = ARGV[i]
  local owner, exp = parse_lease(redis.call('HGET', KEYS[4], shard))
  if not live(owner, exp, now) then
    redis.call('HDEL', KEYS[2], shard, '{{shardStartPrefix}}' .. shard)
    redis.call('SREM', KEYS[3], shard)
    redis.call('HDEL', KEYS[4], shard)
    redis.call('HDEL', KEYS[5], shard)
    redis.call('HDEL', KEYS[6], shard)
    redis.call('HDEL', KEYS[7], shard)
    -- A pruned shard is read by nobody again: reopened, it would gate no
    -- child (the stream no longer lists it) but still stop, at a re-seed
    -- whose record lost, the readers of its children.
    list_drop(KEYS[1], '{{reopenedField}}', shard)
    table.insert(out, shard)
  end
end
if #out > 0 and redis.call('HEXISTS', KEYS[1], 'id') == 1 then
  local list = redis.call('HGET', KEYS[1], '{{prunedField}}') or ' '
  for _, shard in ipairs(out) do list = list .. shard .. ' ' end
  -- The latest 16 KiB or so: enough for the holders paused past their lease.
  if #list > 32768 then list = string.sub(list, string.find(list, ' ', #list - 16384, true)) end
  redis.call('HSET', KEYS[1], '{{prunedField}}', list)
end
return out
