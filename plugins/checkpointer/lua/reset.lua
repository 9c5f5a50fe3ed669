-- ARGV: force, start marker ('' for none), keep ('1': keep the start
-- override and per-shard starts this call does not replace), the number
-- of expected checkpoints (-1: no check), those shard, position pairs,
-- then the shard, position (or per-shard start field, start) pairs to write.
local leases, reply, refused = refuse_live(KEYS[3], ARGV[1])
if refused then return reply end
local n_expect = tonumber(ARGV[4])
local first = 5
local stored = redis.call('HGETALL', KEYS[1])
if n_expect >= 0 then
  -- The caller judged the change (which checkpoints move back) on the
  -- checkpoints it read: refuse if a reader committed since.
  first = 5 + 2 * n_expect
  local expect = {}
  for i = 5, first - 1, 2 do expect[ARGV[i]] = ARGV[i + 1] end
  local n = 0
  for i = 1, #stored, 2 do
    local f = stored[i]
    if string.sub(f, 1, 1) ~= '_' then
      n = n + 1
      if not expect[f] or cmp_pos(expect[f], stored[i + 1]) ~= 0 then return {2} end
    end
  end
  if n ~= n_expect then return {2} end
end
-- The starts kept: the override, and each shard's start unless this call
-- gives the shard a checkpoint or a start of its own.
local kept = {}
if ARGV[3] == '1' then
  local given = {}
  for i = first, #ARGV, 2 do given[ARGV[i]] = true end
  local prefix = '{{shardStartPrefix}}'
  for i = 1, #stored, 2 do
    local f = stored[i]
    local shard = string.sub(f, #prefix + 1)
    local own = string.sub(f, 1, #prefix) == prefix and not given[shard] and not given[f]
    if (f == '{{startField}}' and ARGV[2] == '') or own then
      table.insert(kept, f)
      table.insert(kept, stored[i + 1])
    end
  end
end
fence_all(KEYS[3], leases)
-- A field written into the hash deleted next: the reset always propagates a
-- write, even when the keys are already as it leaves them (a retry), so a
-- WAIT after it on its connection covers it on Redis 7.2 and later.
redis.call('HSET', KEYS[1], '_reset', '1')
redis.call('DEL', KEYS[1], KEYS[2], KEYS[4])
for i = 1, #kept, 2 do redis.call('HSET', KEYS[1], kept[i], kept[i + 1]) end
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], '{{startField}}', ARGV[2]) end
for i = first, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  if ARGV[i + 1] == 'SHARD_END' then redis.call('SADD', KEYS[2], ARGV[i]) end
end
return reply
