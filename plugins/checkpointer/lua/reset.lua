local leases, reply, refused = refuse_live(KEYS[3], ARGV[1])
if refused then return reply end
for i = 1, #leases, 2 do
  local _, _, tok = parse_lease(leases[i + 1])
  redis.call('HSET', KEYS[3], leases[i], lease_value('', 0, tok + 1))
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[4])
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], '{{startField}}', ARGV[2]) end
for i = 3, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  if ARGV[i + 1] == 'SHARD_END' then redis.call('SADD', KEYS[2], ARGV[i]) end
end
return reply
