-- The redelivery mark's store: how far the group may have delivered each
-- shard, written by its owner before it hands the records over. KEYS lease,
-- delivered, epoch; ARGV owner, epoch, then shard, token, position triples.
-- A shard is written only while its lease names the caller under that token
-- (as a commit is), and only forwards. Returns the shards fenced, and the
-- mark each written shard held before the write, shard and mark pairs: a
-- holder that won its shard back at a re-seed whose reply it never got
-- learns there how far the other owner delivered, before it hands over
-- what it reads again (the reads are the HMGET below, so it costs no
-- command).
-- A held shard whose stored mark is already as high gets its stored value
-- written again, as commit.lua does: from Redis 7.2 a WAIT counts only what
-- its own connection propagated, so a retry through another connection that
-- wrote nothing would be reported replicated while no replica has the mark.
-- All shards are read with one HMGET per key and written with one HSET:
-- per shard, three commands cost about 13 us of Redis CPU, these a fraction.
if not epoch_ok(KEYS[3], ARGV[2]) then return forgot(KEYS[3]) end
local shards = {}
for i = 3, #ARGV, 3 do table.insert(shards, ARGV[i]) end
local leases = redis.call('HMGET', KEYS[1], unpack(shards))
local stored = redis.call('HMGET', KEYS[2], unpack(shards))
-- The lease must read '<owner>|<digits>|<token>' exactly; plain string
-- checks, as this runs for every shard of an owner several times a second.
local head = ARGV[1] .. '|'
local function held(v, tok)
  if not v then return false end
  local tail = '|' .. tok
  if #v <= #head + #tail or string.sub(v, 1, #head) ~= head or string.sub(v, -#tail) ~= tail then return false end
  return string.find(string.sub(v, #head + 1, #v - #tail), '^%d+$') ~= nil
end
-- Whole-record positions without leading zeros (what Kinesis gives) are
-- compared by length, then as strings; anything else by cmp_pos.
local function after(pos, cur)
  if string.find(pos, '^[1-9]%d*$') and string.find(cur, '^[1-9]%d*$') then
    if #pos ~= #cur then return #pos > #cur end
    return pos > cur
  end
  local _, _, _, ok = parse_pos(cur)
  return not ok or cmp_pos(pos, cur) > 0
end
local fenced, writes, found = {}, {}, {}
for j, shard in ipairs(shards) do
  local i = 3 * j
  if not held(leases[j], ARGV[i + 1]) then
    table.insert(fenced, shard)
  else
    local cur, pos = stored[j], ARGV[i + 2]
    if cur then
      table.insert(found, shard)
      table.insert(found, cur)
      if not after(pos, cur) then pos = cur end
    end
    table.insert(writes, shard)
    table.insert(writes, pos)
  end
end
if #writes > 0 then redis.call('HSET', KEYS[2], unpack(writes)) end
return {fenced, found}
