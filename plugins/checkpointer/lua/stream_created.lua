local recorded = redis.call('HGET', KEYS[1], '{{streamCreatedField}}') or ARGV[1]
if recorded == ARGV[2] then
  redis.call('HSET', KEYS[1], '{{streamCreatedField}}', ARGV[2])
  return 0
end
if tonumber(ARGV[2]) < tonumber(recorded) then
  return -1
end
fence_all(KEYS[4])
local ckpt = redis.call('HKEYS', KEYS[2])
for _, f in ipairs(ckpt) do
  if string.sub(f, 1, 1) ~= '_' then redis.call('HDEL', KEYS[2], f) end
end
redis.call('DEL', KEYS[3], KEYS[5])
redis.call('HSET', KEYS[1], '{{streamCreatedField}}', ARGV[2])
return 1
