-- Writes delivered positions back from an export (reset --to
-- sequences=<export>), each only forwards: a mark never moves back.
-- KEYS delivered; ARGV shard, position pairs. Returns the number moved.
-- A mark already as far is written again with its stored value, so the
-- call always propagates a write for the WAIT after it (Redis 7.2 and
-- later count only the connection's own writes).
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
  else
    redis.call('HSET', KEYS[1], ARGV[i], cur)
  end
end
return n
