local now = now_ms()
local f = tonumber(redis.call('HGET', KEYS[1], '{{formatField}}'))
local mine = tonumber(ARGV[2])
if f and f > mine then return redis.error_reply('FORMAT ' .. f) end
if not redis.call('HGET', KEYS[1], 'id') then
  redis.call('HSET', KEYS[1], 'id', ARGV[1], 'start', now, '{{createdField}}', now, '{{formatField}}', mine)
  return {now, now, 0, ARGV[1], now}
end
if not f or f < mine then redis.call('HSET', KEYS[1], '{{formatField}}', mine) end
local created = tonumber(redis.call('HGET', KEYS[1], '{{createdField}}')) or 0
local reseeded = tonumber(redis.call('HGET', KEYS[1], '{{reseededField}}')) or 0
local start = tonumber(redis.call('HGET', KEYS[1], 'start')) or 0
return {now, created, reseeded, redis.call('HGET', KEYS[1], 'id'), start}
