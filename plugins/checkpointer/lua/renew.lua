local gone, owner, exp, tok = known_lease(KEYS[1], ARGV[1], KEYS[2], ARGV[5], ARGV[2], ARGV[3])
if gone then return gone end
local now = now_ms()
if owner ~= ARGV[2] or tok ~= tonumber(ARGV[3]) then return {0, 0, now} end
exp = now + tonumber(ARGV[4])
redis.call('HSET', KEYS[1], ARGV[1], lease_value(owner, exp, tok))
return {1, exp, now}
