-- KEYS streams; ARGV owner, token, key. Drops a pruned stream's entry.
-- Fenced ({0}) unless the caller holds the lease under that token; an entry
-- found again since (not gone) stays.
local owner, _, tok = parse_lease(redis.call('HGET', KEYS[1], '_lease'))
if owner ~= ARGV[1] or tok ~= tonumber(ARGV[2]) then return 0 end
local field = 's:' .. ARGV[3]
local v = redis.call('HGET', KEYS[1], field)
if v and string.match(v, '|0|[01]$') then return 1 end
redis.call('HDEL', KEYS[1], field)
return 1
