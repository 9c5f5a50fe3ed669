return handoff_requests(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], now_ms(), ARGV[3])
