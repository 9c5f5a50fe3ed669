local recorded = redis.call('HGET', KEYS[1], '{{streamCreatedField}}') or ARGV[1]
if recorded == ARGV[2] then
  redis.call('HSET', KEYS[1], '{{streamCreatedField}}', ARGV[2])
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
redis.call('HSET', KEYS[1], '{{streamCreatedField}}', ARGV[2])
return 1
