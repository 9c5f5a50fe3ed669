-- KEYS streams; ARGV owner, token, intervalMs. The lister's discovery
-- lease runs another interval from now while it lists: a listing longer
-- than the interval (many streams to describe or to read the tags of)
-- must not lapse, or another instance claims the lease, lists too, and the
-- first one's result is fenced. Returns 1, or 0 when the caller no longer
-- holds the lease under that token.
local now = now_ms()
local owner, _, tok = parse_lease(redis.call('HGET', KEYS[1], '_lease'))
if owner ~= ARGV[1] or tok ~= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], '_lease', lease_value(owner, now + tonumber(ARGV[3]), tok))
return 1
