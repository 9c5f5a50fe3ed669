-- Writes delivered positions back from an export (reset --to
-- sequences=<export>), each only forwards: a mark never moves back.
-- KEYS delivered; ARGV shard, position pairs. Returns the number written.
local n = 0
for i = 1, #ARGV, 2 do
  local cur = redis.call('HGET', KEYS[1], ARGV[i])
  local ahead = true
  if cur then
    local _, _, _, ok = parse_pos(cur)
    ahead = not ok or cmp_pos(ARGV[i + 1], cur) > 0
  end
  if ahead then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
    n = n + 1
  end
end
return n
