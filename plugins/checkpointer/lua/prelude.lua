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
-- Returns the FORGOT error reply when the epoch differs or the store does
-- not know the lease at all, else nil and the lease's owner, expiry, token.
local function known_lease(lease_key, shard, epoch_key, known)
  if not epoch_ok(epoch_key, known) then return forgot(epoch_key) end
  local raw = redis.call('HGET', lease_key, shard)
  if not raw then return forgot(epoch_key) end
  return nil, parse_lease(raw)
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
