-- KEYS streams (the group's discovery hash); ARGV owner, intervalMs.
-- The lease to list the group's streams for one interval: granted when no
-- other holder's lease is live and the last listing is an interval old.
local now = now_ms()
local interval = tonumber(ARGV[2])
local owner, exp, tok = parse_lease(redis.call('HGET', KEYS[1], '_lease'))
local listed = tonumber(redis.call('HGET', KEYS[1], '_listed') or '0')
if (live(owner, exp, now) and owner ~= ARGV[1]) or now < listed + interval then
  return {0, owner or '', exp, tok, listed, now}
end
tok = tok + 1
redis.call('HSET', KEYS[1], '_lease', lease_value(ARGV[1], now + interval, tok))
return {1, ARGV[1], now + interval, tok, listed, now}
