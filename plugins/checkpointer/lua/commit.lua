local gone, owner, _, tok = known_lease(KEYS[1], ARGV[1], KEYS[3], ARGV[5], ARGV[2], ARGV[3])
if gone then return gone end
if owner ~= ARGV[2] or tok ~= tonumber(ARGV[3]) then
  -- The first step of a close run again after its second step released
  -- the lease: already done.
  if owner == '' and tok == tonumber(ARGV[3]) and ARGV[4] == 'SHARD_END' and
     redis.call('HGET', KEYS[2], ARGV[1]) == 'SHARD_END' then
    -- Written again, so a WAIT after it on this connection covers it.
    redis.call('HSET', KEYS[2], ARGV[1], 'SHARD_END')
    return 2
  end
  return 0
end
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if cur then
  local _, _, _, ok = parse_pos(cur)
  if ok and cmp_pos(ARGV[4], cur) <= 0 then
    redis.call('HSET', KEYS[2], ARGV[1], cur)
    return 2
  end
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
return 1
