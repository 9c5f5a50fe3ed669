-- KEYS: progress and lease keys of several streams of one input, in
-- pairs. ARGV: owner, then per stream the number n of its shards and n
-- shard, lag, last, bps quadruples. Returns how many shards were written.
-- One call for every stream, where publish_progress.lua is one per
-- stream: only a Redis that is not a Cluster takes it.
local total = 0
local a = 2
for k = 1, #KEYS, 2 do
  local n = tonumber(ARGV[a])
  local from, to = a + 1, a + 4 * n
  total = total + publish_progress(KEYS[k], KEYS[k + 1], ARGV[1], ARGV, from, to)
  a = to + 1
end
return total
