redis.call('HSET', KEYS[1], ARGV[1], string.format('%s|%d', ARGV[2], now_ms()))
return 1
