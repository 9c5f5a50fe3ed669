-- KEYS: the group records of several streams of one input; ARGV: the id
-- each caller knows, in the same order ('' skips the check). Returns, per
-- record, 1 when it holds the known id, else the id it holds ('' when it
-- is gone). One call for every stream, where group.lua is one per stream:
-- only a Redis that is not a Cluster takes it, since each stream's keys
-- have a slot of their own there.
local r = {}
for i, key in ipairs(KEYS) do
  if ARGV[i] == '' or epoch_ok(key, ARGV[i]) then
    r[i] = 1
  else
    r[i] = redis.call('HGET', key, 'id') or ''
  end
end
return r
