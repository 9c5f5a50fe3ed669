local gone, owner, _, tok = known_lease(KEYS[1], ARGV[1], KEYS[5], ARGV[4], ARGV[2], ARGV[3])
if gone then return gone end
if tok == tonumber(ARGV[3]) and owner == '' and redis.call('SISMEMBER', KEYS[3], ARGV[1]) == 1 then
  -- Written again, so a WAIT after it on this connection covers the close.
  redis.call('HSET', KEYS[2], ARGV[1], 'SHARD_END')
  if provisional(KEYS[5], ARGV[1]) then return 2 end
  return 1
end
if owner ~= ARGV[2] or tok ~= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], 'SHARD_END')
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('HSET', KEYS[1], ARGV[1], lease_value('', 0, tok))
redis.call('HDEL', KEYS[4], ARGV[1])
-- Read to its end by its owner: a shard won back from a newcomer's close
-- (reseed.lua) is closed again, and a known close may be written back.
list_drop(KEYS[5], '{{reopenedField}}', ARGV[1])
-- A close under a lease a re-seed kept provisional (its holder's record
-- lost) is provisional too: 2 tells the caller so.
if provisional(KEYS[5], ARGV[1]) then return 2 end
return 1
