local n = 0
for i = 2, #ARGV, 4 do
  local owner = parse_lease(redis.call('HGET', KEYS[2], ARGV[i]))
  if owner == ARGV[1] then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1] .. '|' .. ARGV[i + 2] .. '|' .. ARGV[1] .. '|bps=' .. ARGV[i + 3])
    n = n + 1
  end
end
return n
