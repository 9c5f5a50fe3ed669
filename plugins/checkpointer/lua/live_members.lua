return live_members(KEYS[1], ARGV[1], now_ms())
