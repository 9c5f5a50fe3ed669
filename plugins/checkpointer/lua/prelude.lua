local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The owner may itself hold '|', so the two numbers are taken from the right.
local function parse_lease(v)
  if not v then return nil, 0, 0 end
  local owner, exp, tok = string.match(v, '^(.*)|(%d+)|(%d+)$')
  if not owner then return nil, 0, 0 end
  return owner, tonumber(exp), tonumber(tok)
end

local function lease_value(owner, exp, tok)
  return string.format('%s|%d|%d', owner, exp, tok)
end

-- Lua's unpack takes a few thousand values at most (LUAI_MAXCSTACK), so a
-- variadic command over more fields is sent in chunks of this many.
local chunk_fields = 1000

-- The values of the fields names[1..n] of the hash at key, in order (false
-- for a field the hash lacks), read with HMGET in chunks of chunk_fields.
local function hmget(key, names)
  local out = {}
  for i = 1, #names, chunk_fields do
    local part = redis.call('HMGET', key, unpack(names, i, math.min(i + chunk_fields - 1, #names)))
    for j = 1, #part do out[i + j - 1] = part[j] end
  end
  return out
end

-- Sets the field, value pairs flat[1..] of the hash at key, with HSET in
-- chunks of chunk_fields pairs; nothing when flat is empty.
local function hset_pairs(key, flat)
  for i = 1, #flat, 2 * chunk_fields do
    redis.call('HSET', key, unpack(flat, i, math.min(i + 2 * chunk_fields - 1, #flat)))
  end
end

local function live(owner, exp, now)
  return owner ~= nil and owner ~= '' and exp > now
end

-- The live-lease refusal of reset and delete. Returns the lease hash's raw
-- fields and values, the script's reply ({1, liveShard...}, or
-- {0, liveShard...} when refused) and whether it refuses: leases are live
-- now and force is not '1'.
local function refuse_live(key, force)
  local now = now_ms()
  local leases = redis.call('HGETALL', key)
  local held = {}
  for i = 1, #leases, 2 do
    local owner, exp = parse_lease(leases[i + 1])
    if live(owner, exp, now) then table.insert(held, leases[i]) end
  end
  local refused = #held > 0 and force ~= '1'
  if refused then table.insert(held, 1, 0) else table.insert(held, 1, 1) end
  return leases, held, refused
end

-- Frees every lease of the hash at key with its token bumped, so a reader
-- still running is fenced out of its next renewal or commit: a reset, or a
-- stream created again under the same name. leases is the hash's HGETALL
-- when the caller has read it already.
local function fence_all(key, leases)
  leases = leases or redis.call('HGETALL', key)
  for i = 1, #leases, 2 do
    local _, _, tok = parse_lease(leases[i + 1])
    redis.call('HSET', key, leases[i], lease_value('', 0, tok + 1))
  end
end

-- Clears the state of a stream incarnation that was deleted: every
-- checkpoint (not the '_' fields: the start override stays), the closed
-- set and the hand-off requests, and every lease freed with its token
-- bumped. stream_created when the stream was created again, reseed when a
-- seed of the new stream finds the deleted one's written back.
local function clear_incarnation(ckpt_key, closed_key, lease_key, handoff_key)
  fence_all(lease_key)
  for _, f in ipairs(redis.call('HKEYS', ckpt_key)) do
    if string.sub(f, 1, 1) ~= '_' then redis.call('HDEL', ckpt_key, f) end
  end
  redis.call('DEL', closed_key, handoff_key)
end

-- The group record (KEYS epoch, a HASH: id, start, reseeded) names this
-- incarnation of the group's state. A mutation presents the id its caller
-- knows; a missing or different one means the store forgot the group
-- (restarted empty, flushed, replaced): the reply is an error starting with
-- FORGOT, never a lost lease.
local function forgot(key)
  return redis.error_reply('FORGOT ' .. (redis.call('HGET', key, 'id') or ''))
end

local function epoch_ok(key, known)
  return redis.call('HGET', key, 'id') == known
end

-- Reads a shard's lease for a mutation that presents the epoch it knows.
-- Whether shard is provisional (reseed.lua): its state was written under a
-- group record a re-seed replaced, and a holder of the kept record that
-- re-seeds wins it back. A lease of such a shard that is not the caller's
-- is one the store cannot vouch for: a mutation presenting another is
-- answered FORGOT, so that its caller re-seeds, rather than fenced.
local function provisional(epoch_key, shard)
  local list = redis.call('HGET', epoch_key, '{{provisionalField}}')
  return list and string.find(list, ' ' .. shard .. ' ', 1, true) ~= nil
end

-- Removes shard from the " a b ... " list in field of the group record at
-- epoch_key, deleting the field once the list is empty.
local function list_drop(epoch_key, field, shard)
  local list = redis.call('HGET', epoch_key, field)
  if not list then return end
  list = string.gsub(list, ' ' .. string.gsub(shard, '%p', '%%%0') .. ' ', ' ', 1)
  if list == ' ' then
    redis.call('HDEL', epoch_key, field)
  else
    redis.call('HSET', epoch_key, field, list)
  end
end

-- Returns the FORGOT error reply when the epoch differs or the store does
-- not know the lease at all, or (with owner and token) holds another lease
-- of a provisional shard, else nil and the lease's owner, expiry, token.
local function known_lease(lease_key, shard, epoch_key, known, owner, token)
  if not epoch_ok(epoch_key, known) then return forgot(epoch_key) end
  local raw = redis.call('HGET', lease_key, shard)
  if not raw then return forgot(epoch_key) end
  local o, e, t = parse_lease(raw)
  if owner and (o ~= owner or t ~= tonumber(token)) and provisional(epoch_key, shard) then
    return forgot(epoch_key)
  end
  return nil, o, e, t
end

local function strip_zeros(s)
  local r = string.gsub(s, '^0+', '')
  if r == '' then return '0' end
  return r
end

-- Returns seq, sub (nil for a whole record), is_end, ok.
local function parse_pos(p)
  if p == 'SHARD_END' then return nil, nil, true, true end
  local seq, sub = string.match(p, '^(%d+)/(%d+)$')
  if seq then return strip_zeros(seq), tonumber(sub), false, true end
  if string.match(p, '^%d+$') then return strip_zeros(p), nil, false, true end
  return nil, nil, false, false
end

-- Sequence numbers are decimals of up to 128 bits: Lua numbers are doubles,
-- so compare them as strings, by length and then lexicographically.
local function cmp_pos(a, b)
  local as, asub, aend = parse_pos(a)
  local bs, bsub, bend = parse_pos(b)
  if aend and bend then return 0 end
  if aend then return 1 end
  if bend then return -1 end
  if #as ~= #bs then
    if #as < #bs then return -1 end
    return 1
  end
  if as ~= bs then
    if as < bs then return -1 end
    return 1
  end
  -- Same record: the whole record is past each of its sub-records.
  if asub == nil and bsub == nil then return 0 end
  if asub == nil then return 1 end
  if bsub == nil then return -1 end
  if asub == bsub then return 0 end
  if asub < bsub then return -1 end
  return 1
end

-- Renews the leases named by the shard, token pairs args[from..to] for
-- owner by period ms, presenting the group record id known. Returns nil
-- when the store forgot (the record differs, or a presented lease is
-- unknown and was not pruned), else {expiresAt, now, lostShard...}: the
-- body of renew_all.lua, and of renew_streams.lua once per stream.
local function renew_leases(lease_key, epoch_key, owner, period, known, args, from, to)
  if not epoch_ok(epoch_key, known) then return nil end
  -- Each lease is read once, here, and its value kept for the renewal
  -- below: an idle group's cost is mostly renewals. The reads are one
  -- HMGET and the writes one HSET (per chunk_fields leases), so Redis
  -- runs a handful of commands per renewal however many leases it covers.
  local shards = {}
  for i = from, to, 2 do shards[#shards + 1] = args[i] end
  local values = hmget(lease_key, shards)
  local pruned
  for j, shard in ipairs(shards) do
    if not values[j] then
      pruned = pruned or redis.call('HGET', epoch_key, '{{prunedField}}') or ''
      if not string.find(pruned, ' ' .. shard .. ' ', 1, true) then return nil end
    end
  end
  local now = now_ms()
  local exp = now + tonumber(period)
  local out = {exp, now}
  local unsure = false
  local writes = {}
  for j, shard in ipairs(shards) do
    local o, _, tok = parse_lease(values[j])
    if o == owner and tok == tonumber(args[from + 2 * (j - 1) + 1]) then
      writes[#writes + 1] = shard
      writes[#writes + 1] = lease_value(o, exp, tok)
    else
      table.insert(out, shard)
      unsure = unsure or provisional(epoch_key, shard)
    end
  end
  hset_pairs(lease_key, writes)
  -- Another lease of a provisional shard: the caller re-seeds (the leases
  -- renewed here stay renewed, as they would be by its re-seed).
  if unsure then return nil end
  return out
end

-- Writes the progress of each shard named by the shard, lag, last, bps
-- quadruples args[from..to] whose lease names owner; returns how many:
-- the body of publish_progress.lua, and of publish_progresses.lua once per
-- stream. The leases are read in one HMGET and the progress written in
-- one HSET (per chunk_fields shards).
local function publish_progress(progress_key, lease_key, owner, args, from, to)
  local shards = {}
  for i = from, to, 4 do shards[#shards + 1] = args[i] end
  local values = hmget(lease_key, shards)
  local writes = {}
  for j, shard in ipairs(shards) do
    if parse_lease(values[j]) == owner then
      local i = from + 4 * (j - 1)
      writes[#writes + 1] = shard
      writes[#writes + 1] = args[i + 1] .. '|' .. args[i + 2] .. '|' .. owner .. '|bps=' .. args[i + 3]
    end
  end
  hset_pairs(progress_key, writes)
  return #writes / 2
end

-- The members of the sorted set at key that heartbeat within period ms of
-- now; the others are removed.
local function live_members(key, period, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. string.format('%d', now - tonumber(period)))
  return redis.call('ZRANGE', key, 0, -1)
end

-- {now, shard, lease value, ...} of every lease in the hash at key.
local function all_leases(key, now)
  local out = {now}
  local all = redis.call('HGETALL', key)
  for i = 1, #all do out[i + 1] = all[i] end
  return out
end

-- {shard, requester, ...}: the hand-off requests for shards owner holds
-- live. A request whose requester stopped heartbeating (within period ms)
-- is deleted, so a dead instance never makes an owner give a shard up; so
-- is one made more than max_age ms ago, which its requester no longer
-- waits for: a shard released for it then would be left unowned.
local function handoff_requests(handoff_key, lease_key, members_key, owner, period, now, max_age)
  local out = {}
  local reqs = redis.call('HGETALL', handoff_key)
  for i = 1, #reqs, 2 do
    local shard = reqs[i]
    local requester, at = string.match(reqs[i + 1], '^(.*)|(%d+)$')
    requester = requester or reqs[i + 1]
    local seen = tonumber(redis.call('ZSCORE', members_key, requester))
    if not seen or seen < now - tonumber(period) or (at and tonumber(at) < now - tonumber(max_age)) then
      redis.call('HDEL', handoff_key, shard)
    else
      local o, exp = parse_lease(redis.call('HGET', lease_key, shard))
      if o == owner and live(o, exp, now) then
        table.insert(out, shard)
        table.insert(out, requester)
      end
    end
  end
  return out
end
