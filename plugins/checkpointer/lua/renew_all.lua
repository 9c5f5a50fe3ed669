if not epoch_ok(KEYS[2], ARGV[3]) then return forgot(KEYS[2]) end
-- A lease the store does not know means it forgot, unless the shard was
-- pruned (prune): then the lease is lost.
local pruned
for i = 4, #ARGV, 2 do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 0 then
    pruned = pruned or redis.call('HGET', KEYS[2], '{{prunedField}}') or ''
    if not string.find(pruned, ' ' .. ARGV[i] .. ' ', 1, true) then return forgot(KEYS[2]) end
  end
end
local now = now_ms()
local exp = now + tonumber(ARGV[2])
local out = {exp, now}
for i = 4, #ARGV, 2 do
  local owner, _, tok = parse_lease(redis.call('HGET', KEYS[1], ARGV[i]))
  if owner == ARGV[1] and tok == tonumber(ARGV[i + 1]) then
    redis.call('HSET', KEYS[1], ARGV[i], lease_value(owner, exp, tok))
  else
    table.insert(out, ARGV[i])
  end
end
return out
