-- KEYS streams; ARGV owner, token, retentionMs, format, seedFirstMs,
-- seedCount, then seedCount key, createdMs, seenMs, appeared quadruples
-- (the publisher's last read of the hash), then key, name, createdMs,
-- status quadruples: what the lease holder listed. Fenced ({0}) unless the
-- caller holds the lease under that token. An entry is
-- "<name>|<createdMs>|<status>|<seenMs>|<goneMs>|<appeared>" under the
-- field "s:<key>". A stream first found after the group's first listing,
-- or found with another creation time (created again), appeared (1); a
-- stream no longer listed is gone since now; one listed again is back.
-- A hash that lost the group's first listing (Redis flushed or restarted
-- empty) is re-seeded from the publisher's last read: the first listing's
-- time stays, a stream it knew keeps when it was seen and whether it
-- appeared, and a stream it did not know appeared (else a stream created
-- while Redis was empty would start at start_position, not at
-- new_stream_start_position).
-- Returns {1, now, expiredKey...}: the streams gone for longer than the
-- retention, for the caller to prune.
local now = now_ms()
local owner, _, tok = parse_lease(redis.call('HGET', KEYS[1], '_lease'))
if owner ~= ARGV[1] or tok ~= tonumber(ARGV[2]) then return {0, now} end
local retention = tonumber(ARGV[3])
local seedFirst = tonumber(ARGV[5])
local nseed = tonumber(ARGV[6])
local seed = {}
local first = redis.call('HGET', KEYS[1], '_first')
local later = '1'
if not first and seedFirst > 0 then
  redis.call('HSET', KEYS[1], '_first', seedFirst)
  for i = 7, 6 + 4 * nseed, 4 do
    seed['s:' .. ARGV[i]] = {ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]}
  end
elseif not first then
  redis.call('HSET', KEYS[1], '_first', now)
  later = '0'
end
local found = {}
for i = 7 + 4 * nseed, #ARGV, 4 do
  local field = 's:' .. ARGV[i]
  found[field] = true
  local seen, appeared = now, later
  local old = redis.call('HGET', KEYS[1], field)
  if old then
    local _, ocreated, _, oseen, _, oappeared = string.match(old, '^(.*)|(%d+)|(.*)|(%d+)|(%d+)|([01])$')
    if ocreated == ARGV[i + 2] then seen, appeared = oseen, oappeared else appeared = '1' end
  elseif seed[field] and seed[field][1] == ARGV[i + 2] then
    seen, appeared = seed[field][2], seed[field][3]
  end
  redis.call('HSET', KEYS[1], field, table.concat({ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], seen, '0', appeared}, '|'))
end
local out = {1, now}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local field = all[i]
  if string.sub(field, 1, 2) == 's:' and not found[field] then
    local name, created, status, seen, gone, appeared = string.match(all[i + 1], '^(.*)|(%d+)|(.*)|(%d+)|(%d+)|([01])$')
    if name and gone == '0' then
      redis.call('HSET', KEYS[1], field, table.concat({name, created, status, seen, now, appeared}, '|'))
    elseif name and now - tonumber(gone) >= retention then
      table.insert(out, string.sub(field, 3))
    end
  end
end
redis.call('HSET', KEYS[1], '_listed', now, '_format', ARGV[4])
return out
