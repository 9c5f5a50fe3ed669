-- One request per shard, all at the same time: a member short of its share
-- asks for its whole shortfall in one call.
local now = now_ms()
for i = 2, #ARGV do
  redis.call('HSET', KEYS[1], ARGV[i], string.format('%s|%d', ARGV[1], now))
end
return 1
