-- KEYS streams; ARGV owner, token, intervalMs. Until when (Redis clock, ms)
-- no other instance can be granted the group's discovery lease, and so
-- publish a listing that finds a released stream again, provided the
-- caller still holds the lease under token: the later of the lease's
-- expiry and an interval after the last listing (discovery_claim grants
-- no earlier). prune_stream, on the stream's own keys (another slot),
-- refuses past it. Returns 0 when another claim replaced the caller's.
local owner, exp, tok = parse_lease(redis.call('HGET', KEYS[1], '_lease'))
if owner ~= ARGV[1] or tok ~= tonumber(ARGV[2]) then return 0 end
local listed = tonumber(redis.call('HGET', KEYS[1], '_listed') or '0')
return math.max(exp, listed + tonumber(ARGV[3]))
