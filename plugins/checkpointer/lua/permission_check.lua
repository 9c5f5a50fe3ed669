-- Tries each command ARGV names, with redis.pcall so that a refusal does
-- not end the script, on scratch keys (KEYS: a hash, a set and a sorted
-- set under the group's hash tag) that it deletes again. DEL goes first:
-- without it the scratch keys could not be removed, so nothing is written.
-- Returns the refused commands; a name without a probe here comes back
-- as "<name>?".
local h, s, z = KEYS[1], KEYS[2], KEYS[3]
local probes = {
  TIME = {'TIME'},
  DEL = {'DEL', h, s, z},
  HGET = {'HGET', h, 'f'},
  HGETALL = {'HGETALL', h},
  HMGET = {'HMGET', h, 'f'},
  HSET = {'HSET', h, 'f', 'v'},
  HSETNX = {'HSETNX', h, 'g', 'v'},
  HDEL = {'HDEL', h, 'f'},
  HEXISTS = {'HEXISTS', h, 'f'},
  HKEYS = {'HKEYS', h},
  SADD = {'SADD', s, 'm'},
  SISMEMBER = {'SISMEMBER', s, 'm'},
  SMEMBERS = {'SMEMBERS', s},
  SREM = {'SREM', s, 'm'},
  ZADD = {'ZADD', z, 0, 'm'},
  ZSCORE = {'ZSCORE', z, 'm'},
  ZRANGE = {'ZRANGE', z, 0, -1},
  ZREMRANGEBYSCORE = {'ZREMRANGEBYSCORE', z, '-inf', '+inf'},
  ZREM = {'ZREM', z, 'm'},
}
-- A refusal reads "... can't run this command ..." (Redis 7.0) or
-- "ACL failure in script: ..." (7.2 and later).
local function refused(reply)
  if type(reply) ~= 'table' or not reply.err then return false end
  return string.find(reply.err, "can't", 1, true) ~= nil or string.find(reply.err, 'ACL', 1, true) ~= nil
end
if refused(redis.pcall(unpack(probes.DEL))) then return {'DEL'} end
local out = {}
for _, name in ipairs(ARGV) do
  local p = probes[name]
  if not p then
    table.insert(out, name .. '?')
  elseif name ~= 'DEL' and refused(redis.pcall(unpack(p))) then
    table.insert(out, name)
  end
end
redis.pcall('DEL', h, s, z)
return out
