-- The redelivery mark's store: how far the group may have delivered each
-- shard, written by its owner before it hands the records over. KEYS lease,
-- delivered, epoch; ARGV owner, epoch, then shard, token, position triples.
-- A shard is written only while its lease names the caller under that token
-- (as a commit is), and only forwards. Returns the shards fenced.
if not epoch_ok(KEYS[3], ARGV[2]) then return forgot(KEYS[3]) end
local fenced = {}
for i = 3, #ARGV, 3 do
  local shard, pos = ARGV[i], ARGV[i + 2]
  local owner, _, tok = parse_lease(redis.call('HGET', KEYS[1], shard))
  if owner ~= ARGV[1] or tok ~= tonumber(ARGV[i + 1]) then
    table.insert(fenced, shard)
  else
    local cur = redis.call('HGET', KEYS[2], shard)
    local ahead = true
    if cur then
      local _, _, _, ok = parse_pos(cur)
      ahead = not ok or cmp_pos(pos, cur) > 0
    end
    if ahead then redis.call('HSET', KEYS[2], shard, pos) end
  end
end
return fenced
