package checkpointer

import "github.com/redis/go-redis/v9"

// Every mutation of the checkpointer's keys is one of these scripts, so that
// each is atomic, sees the Redis server's clock (TIME) and, with every key in
// KEYS under one hash tag, runs on a single Cluster slot. Script.Run sends
// EVALSHA and falls back to EVAL after a restart flushed the script cache.
//
// Lease value: "<owner>|<expiresAtMillis>|<fencingToken>". A released lease
// keeps its field as "|<releasedAtMillis>|<token>" so the token never goes
// back (every acquisition takes the previous token plus one) and the next
// holder knows how long the shard has been unread (see acquireScript). A
// closed shard's or a reset's released lease has 0 there.

// luaPrelude holds the helpers every script shares.
const luaPrelude = `
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
`

func newScript(body string) *redis.Script { return redis.NewScript(luaPrelude + body) }

// acquireScript: KEYS lease, handoff, ckpt, epoch; ARGV shard, owner,
// periodMillis, knownEpoch, newEpoch. A caller that knows no epoch yet joins
// the group, creating its record (id newEpoch, start and created now) if
// there is none (the input joins first, join.go, and waits while a record
// is young and not re-seeded).
// Returns {1|0, owner, expiresAt, token, now, epoch, groupStart, checkpoint,
// startOverride}: 1 when the caller holds the lease, 0 with the live holder
// otherwise. The checkpoint and the override (” when none) come with the
// lease, so a take is one round trip. Within a lease period after a re-seed,
// a shard whose lease the store does not know is not handed out: its holder
// may not have re-seeded it yet.
var acquireScript = newScript(`
local now = now_ms()
local eid = redis.call('HGET', KEYS[4], 'id')
if ARGV[4] == '' then
  if not eid then
    eid = ARGV[5]
    redis.call('HSET', KEYS[4], 'id', eid, 'start', now, '` + createdField + `', now)
  end
elseif eid ~= ARGV[4] then
  return forgot(KEYS[4])
end
local gstart = tonumber(redis.call('HGET', KEYS[4], 'start')) or 0
local raw = redis.call('HGET', KEYS[1], ARGV[1])
local owner, exp, tok = parse_lease(raw)
local period = tonumber(ARGV[3])
-- How long ago the previous holder's lease ended (it expired, or was
-- released at that time), or -1 when unknown.
local quiet = -1
if live(owner, exp, now) then
  if owner ~= ARGV[2] then return {0, owner, exp, tok, now, eid, gstart, '', '', -1} end
  -- The caller holds it already: a renewal, same token.
  exp = now + period
  redis.call('HSET', KEYS[1], ARGV[1], lease_value(owner, exp, tok))
else
  local reseeded = tonumber(redis.call('HGET', KEYS[4], 'reseeded')) or 0
  if not raw and now < reseeded + period then
    return {0, '', reseeded + period, 0, now, eid, gstart, '', '', -1}
  end
  if raw and exp > 0 then quiet = now - exp end
  owner = ARGV[2]
  tok = tok + 1
  exp = now + period
  redis.call('HSET', KEYS[1], ARGV[1], lease_value(owner, exp, tok))
  -- A request to hand the shard over was meant for the previous holder.
  redis.call('HDEL', KEYS[2], ARGV[1])
end
local ck = redis.call('HGET', KEYS[3], ARGV[1]) or ''
local start = redis.call('HGET', KEYS[3], '` + startField + `') or ''
return {1, owner, exp, tok, now, eid, gstart, ck, start, quiet}
`)

// renewScript: KEYS lease, epoch; ARGV shard, owner, token, periodMillis,
// epoch. Returns {1, expiresAt, now} or {0, 0, now} when fenced. An expired
// lease nobody took is still the caller's: its token proves no one else held
// it. A lease the store does not know at all means it forgot (FORGOT).
var renewScript = newScript(`
local gone, owner, exp, tok = known_lease(KEYS[1], ARGV[1], KEYS[2], ARGV[5])
if gone then return gone end
local now = now_ms()
if owner ~= ARGV[2] or tok ~= tonumber(ARGV[3]) then return {0, 0, now} end
exp = now + tonumber(ARGV[4])
redis.call('HSET', KEYS[1], ARGV[1], lease_value(owner, exp, tok))
return {1, exp, now}
`)

// renewAllScript: KEYS lease, epoch; ARGV owner, periodMillis, epoch, then
// shard, token pairs. Returns {expiresAt, now, lostShard...}; FORGOT when
// the epoch differs or a presented lease is unknown to the store.
var renewAllScript = newScript(`
if not epoch_ok(KEYS[2], ARGV[3]) then return forgot(KEYS[2]) end
for i = 4, #ARGV, 2 do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 0 then return forgot(KEYS[2]) end
end
local now = now_ms()
local exp = now + tonumber(ARGV[2])
local out = {exp, now}
for i = 4, #ARGV, 2 do
  local owner, _, tok = parse_lease(redis.call('HGET', KEYS[1], ARGV[i]))
  if owner == ARGV[1] and tok == tonumber(ARGV[i + 1]) then
    redis.call('HSET', KEYS[1], ARGV[i], lease_value(owner, exp, tok))
  else
    table.insert(out, ARGV[i])
  end
end
return out
`)

// releaseScript: KEYS lease, handoff, epoch; ARGV shard, owner, token,
// epoch. Returns 1, or 0 when fenced. Releasing twice is not an error.
var releaseScript = newScript(`
local gone, owner, _, tok = known_lease(KEYS[1], ARGV[1], KEYS[3], ARGV[4])
if gone then return gone end
if tok ~= tonumber(ARGV[3]) then return 0 end
if owner == ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], lease_value('', now_ms(), tok))
elseif owner ~= '' then
  return 0
end
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
`)

// commitScript: KEYS lease, ckpt, epoch; ARGV shard, owner, token,
// position, epoch. Returns 1 written, 2 not written because the stored one
// is not older, 0 fenced. A commit already done writes the stored value
// again: with replicas to wait for, the WAIT that follows on the same
// connection then counts from this write, which comes after every earlier
// one (a retry may run on another pooled connection, whose own last write
// could be older than the one the replicas must hold).
var commitScript = newScript(`
local gone, owner, _, tok = known_lease(KEYS[1], ARGV[1], KEYS[3], ARGV[5])
if gone then return gone end
if owner ~= ARGV[2] or tok ~= tonumber(ARGV[3]) then
  -- The first step of a close run again after its second step released
  -- the lease: already done.
  if owner == '' and tok == tonumber(ARGV[3]) and ARGV[4] == 'SHARD_END' and
     redis.call('HGET', KEYS[2], ARGV[1]) == 'SHARD_END' then
    redis.call('HSET', KEYS[2], ARGV[1], 'SHARD_END')
    return 2
  end
  return 0
end
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if cur then
  local _, _, _, ok = parse_pos(cur)
  if ok and cmp_pos(ARGV[4], cur) <= 0 then
    redis.call('HSET', KEYS[2], ARGV[1], cur)
    return 2
  end
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
return 1
`)

// closeScript: KEYS lease, ckpt, closed, handoff, epoch; ARGV shard, owner,
// token, epoch. Returns 1, or 0 when fenced. Running it again after it
// succeeded returns 1 (the close waits for replicas and may be retried),
// and writes SHARD_END again so that the WAIT after it covers the close
// (see commitScript).
var closeScript = newScript(`
local gone, owner, _, tok = known_lease(KEYS[1], ARGV[1], KEYS[5], ARGV[4])
if gone then return gone end
if tok == tonumber(ARGV[3]) and owner == '' and redis.call('SISMEMBER', KEYS[3], ARGV[1]) == 1 then
  redis.call('HSET', KEYS[2], ARGV[1], 'SHARD_END')
  return 1
end
if owner ~= ARGV[2] or tok ~= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], 'SHARD_END')
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('HSET', KEYS[1], ARGV[1], lease_value('', 0, tok))
redis.call('HDEL', KEYS[4], ARGV[1])
return 1
`)

// closedScript: KEYS closed, epoch; ARGV epoch (” to skip the check).
// Returns the closed set; FORGOT when the caller's epoch is gone, so a
// forgetting store's empty set is never taken for the group's.
var closedScript = newScript(`
if ARGV[1] ~= '' and not epoch_ok(KEYS[2], ARGV[1]) then return forgot(KEYS[2]) end
return redis.call('SMEMBERS', KEYS[1])
`)

// reseedScript: KEYS epoch, ckpt, closed, lease; ARGV epochId, groupStart,
// owner, periodMillis, nCheckpoints, startOverride (” for none), then
// nCheckpoints shard, position pairs, nClosed, nClosed shards, then shard,
// token pairs of the caller's leases. It writes back what a store that
// forgot lost, as one instance knew it: the group record (the earlier
// start wins, so two instances that disagree converge on one), checkpoints
// (only forwards), the start override (if none), closed shards, and the
// caller's leases with their tokens (so commits in flight stay valid),
// unless another owner took one meanwhile. It marks the group re-seeded
// now: for a lease period, shards whose lease the store does not know are
// not handed out. Returns {epochId, groupStart, foundId, expiresAt, now,
// lostShard...}.
var reseedScript = newScript(`
local now = now_ms()
local found = redis.call('HGET', KEYS[1], 'id') or ''
local fstart = tonumber(redis.call('HGET', KEYS[1], 'start'))
local mine = tonumber(ARGV[2])
if found == '' or (found ~= ARGV[1] and fstart ~= nil and fstart > mine) then
  redis.call('HSET', KEYS[1], 'id', ARGV[1], 'start', ARGV[2])
end
redis.call('HSET', KEYS[1], 'reseeded', now)
local i = 7
for _ = 1, tonumber(ARGV[5]) do
  local cur = redis.call('HGET', KEYS[2], ARGV[i])
  local ok = true
  if cur then
    local _, _, _, valid = parse_pos(cur)
    ok = not valid or cmp_pos(ARGV[i + 1], cur) > 0
  end
  if ok then redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) end
  i = i + 2
end
if ARGV[6] ~= '' then redis.call('HSETNX', KEYS[2], '` + startField + `', ARGV[6]) end
local nclosed = tonumber(ARGV[i])
i = i + 1
for _ = 1, nclosed do
  redis.call('SADD', KEYS[3], ARGV[i])
  redis.call('HSET', KEYS[2], ARGV[i], 'SHARD_END')
  i = i + 1
end
local exp = now + tonumber(ARGV[4])
local out = {redis.call('HGET', KEYS[1], 'id'), tonumber(redis.call('HGET', KEYS[1], 'start')), found, exp, now}
for j = i, #ARGV, 2 do
  local raw = redis.call('HGET', KEYS[4], ARGV[j])
  local owner, lexp, tok = parse_lease(raw)
  local want = tonumber(ARGV[j + 1])
  local free = not live(owner, lexp, now)
  if not raw or (owner == ARGV[3] and tok == want) or
     (free and (tok < want or (tok == want and owner == ''))) then
    redis.call('HSET', KEYS[4], ARGV[j], lease_value(ARGV[3], exp, want))
  else
    table.insert(out, ARGV[j])
  end
end
return out
`)

// leasesScript: KEYS lease. Returns {now, field, value, ...}; a script so the
// expiry is judged by the same clock the mutations use.
var leasesScript = newScript(`
local out = {now_ms()}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all do out[i + 1] = all[i] end
return out
`)

// heartbeatScript: KEYS members; ARGV member. Returns now.
var heartbeatScript = newScript(`
local now = now_ms()
redis.call('ZADD', KEYS[1], now, ARGV[1])
return now
`)

// liveMembersScript: KEYS members; ARGV periodMillis. Prunes members silent
// for longer than the period and returns the rest.
var liveMembersScript = newScript(`
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. string.format('%d', now - tonumber(ARGV[1])))
return redis.call('ZRANGE', KEYS[1], 0, -1)
`)

// removeMemberScript: KEYS members; ARGV member.
var removeMemberScript = newScript(`
return redis.call('ZREM', KEYS[1], ARGV[1])
`)

// requestHandoffScript: KEYS handoff; ARGV shard, requester.
// Value: "<requester>|<requestedAtMillis>".
var requestHandoffScript = newScript(`
redis.call('HSET', KEYS[1], ARGV[1], string.format('%s|%d', ARGV[2], now_ms()))
return 1
`)

// handoffRequestsScript: KEYS handoff, lease, members; ARGV owner,
// periodMillis. Returns {shard, requester, ...} for live shards the owner
// holds whose requester is a live member; requests from dead members are
// deleted, so a vanished requester never makes an owner give a shard up.
var handoffRequestsScript = newScript(`
local now = now_ms()
local out = {}
local reqs = redis.call('HGETALL', KEYS[1])
for i = 1, #reqs, 2 do
  local shard = reqs[i]
  local requester = string.match(reqs[i + 1], '^(.*)|%d+$') or reqs[i + 1]
  local seen = tonumber(redis.call('ZSCORE', KEYS[3], requester))
  if not seen or seen < now - tonumber(ARGV[2]) then
    redis.call('HDEL', KEYS[1], shard)
  else
    local owner, exp = parse_lease(redis.call('HGET', KEYS[2], shard))
    if owner == ARGV[1] and live(owner, exp, now) then
      table.insert(out, shard)
      table.insert(out, requester)
    end
  end
end
return out
`)

// resetScript: KEYS ckpt, closed, lease, handoff; ARGV force ("1"/"0"),
// start marker ("" for none), then shard, position pairs. Refuses with
// {0, liveShard...} while leases are live unless forced; otherwise frees
// every lease with its token bumped (a reader still running is fenced out of
// its next renew or commit), replaces the checkpoints and the closed set and
// returns {1, liveShard...}.
var resetScript = newScript(`
local leases, reply, refused = refuse_live(KEYS[3], ARGV[1])
if refused then return reply end
for i = 1, #leases, 2 do
  local _, _, tok = parse_lease(leases[i + 1])
  redis.call('HSET', KEYS[3], leases[i], lease_value('', 0, tok + 1))
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[4])
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], '` + startField + `', ARGV[2]) end
for i = 3, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  if ARGV[i + 1] == 'SHARD_END' then redis.call('SADD', KEYS[2], ARGV[i]) end
end
return reply
`)

// deleteScript: KEYS ckpt, closed, lease, members, handoff, progress,
// epoch; ARGV force. Same refusal as resetScript; then deletes every key of
// the group+stream, the group record included: the next take starts a new
// one.
var deleteScript = newScript(`
local _, reply, refused = refuse_live(KEYS[3], ARGV[1])
if refused then return reply end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7])
return reply
`)

// publishProgressScript: KEYS progress, lease; ARGV owner, then shard,
// lagMillis, lastDeliveredMillis triples. Value:
// "<lagMillis>|<lastDeliveredMillis>|<owner>". Only shards whose lease names
// the owner are written, so an instance that lost a shard does not
// overwrite what its new owner published. Returns the number written.
var publishProgressScript = newScript(`
local n = 0
for i = 2, #ARGV, 3 do
  local owner = parse_lease(redis.call('HGET', KEYS[2], ARGV[i]))
  if owner == ARGV[1] then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1] .. '|' .. ARGV[i + 2] .. '|' .. ARGV[1])
    n = n + 1
  end
end
return n
`)

// nowScript returns the Redis clock in milliseconds.
var nowScript = newScript(`return now_ms()`)
