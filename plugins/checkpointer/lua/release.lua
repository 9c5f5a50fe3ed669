local gone, owner, _, tok = known_lease(KEYS[1], ARGV[1], KEYS[3], ARGV[4], ARGV[2], ARGV[3])
if gone then return gone end
if tok ~= tonumber(ARGV[3]) then return 0 end
if owner == ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], lease_value('', now_ms(), tok))
elseif owner ~= '' then
  return 0
end
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
