local recorded = redis.call('HGET', KEYS[1], '{{streamCreatedField}}') or ARGV[1]
if recorded == ARGV[2] then
  redis.call('HSET', KEYS[1], '{{streamCreatedField}}', ARGV[2])
  return 0
end
if tonumber(ARGV[2]) < tonumber(recorded) then
  return -1
end
clear_incarnation(KEYS[2], KEYS[3], KEYS[4], KEYS[5])
redis.call('HSET', KEYS[1], '{{streamCreatedField}}', ARGV[2])
return 1
