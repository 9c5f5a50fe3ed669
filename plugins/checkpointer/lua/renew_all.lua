-- A lease the store does not know means it forgot, unless the shard was
-- pruned (prune): then the lease is lost.
local out = renew_leases(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV, 4, #ARGV)
if not out then return forgot(KEYS[2]) end
return out
