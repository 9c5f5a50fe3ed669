return now_ms()
