return all_leases(KEYS[1], now_ms())
