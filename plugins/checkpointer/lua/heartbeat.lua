local now = now_ms()
redis.call('ZADD', KEYS[1], now, ARGV[1])
return now
