local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. string.format('%d', now - tonumber(ARGV[1])))
return redis.call('ZRANGE', KEYS[1], 0, -1)
