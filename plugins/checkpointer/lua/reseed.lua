local now = now_ms()
local found = redis.call('HGET', KEYS[1], 'id') or ''
local fstart = tonumber(redis.call('HGET', KEYS[1], 'start'))
local mine = tonumber(ARGV[2])
if found == '' or (found ~= ARGV[1] and fstart ~= nil and fstart > mine) then
  redis.call('HSET', KEYS[1], 'id', ARGV[1], 'start', ARGV[2])
end
-- The caller's world won when the stored record is now its own: a lease of
-- another owner under the very token it presents was then handed out by the
-- record it replaced (after a wipe tokens start again at 1), not by its own,
-- where every take raises the token.
local won = redis.call('HGET', KEYS[1], 'id') == ARGV[1]
-- Provisional shards: those whose checkpoint, close or lease a group record
-- wrote that a re-seed then replaced (a newcomer's, made on the emptied
-- store). That record's `latest` resolved from its own, later start, so
-- its positions may lie past records that only a holder of the kept record
-- knows it has not read, and its closes and releases may be made from
-- there. They stand until such a holder claims the shard (below), and
-- never outrank it. The list is " a b ... ": every shard of the replaced
-- record's state when a re-seed replaces it, and every shard a seed of a
-- record that lost writes.
local provList = redis.call('HGET', KEYS[1], '{{provisionalField}}') or ' '
local prov = {}
-- Settled positions: the provisional shards whose position a holder of the
-- kept record wrote back (below), " a b ... ". Positions under one record
-- are ordered in time: a holder commits only under its lease, and a later
-- take starts from the earlier holder's commit. So a kept record's
-- position, even one seeded without the lease by an instance that no
-- longer reads the shard, is at or behind every kept-record reader of it,
-- paused or not, and skips nothing; a seed whose record lost moving it
-- back would only deliver again what the kept record's holders delivered.
-- Such a seed writes no position there, and another record's lease of the
-- shard is freed (below). The lease stays provisional: a paused holder of
-- the kept record that took the shard after that commit is still sent to
-- re-seed and claims it back with its own, later position.
local settledList = redis.call('HGET', KEYS[1], '{{settledField}}') or ' '
local function settled(shard) return string.find(settledList, ' ' .. shard .. ' ', 1, true) ~= nil end
local function addProv(shard)
  if string.sub(shard, 1, 1) ~= '_' and not prov[shard] then
    prov[shard] = true
    provList = provList .. shard .. ' '
  end
end
if won and found ~= '' and found ~= ARGV[1] then
  provList = ' '
  settledList = ' '
  for _, f in ipairs(redis.call('HKEYS', KEYS[2])) do addProv(f) end
  for _, f in ipairs(redis.call('SMEMBERS', KEYS[3])) do addProv(f) end
  for _, f in ipairs(redis.call('HKEYS', KEYS[4])) do addProv(f) end
else
  for f in string.gmatch(provList, '%S+') do prov[f] = true end
end
-- A seed of a record that lost writes only into shards the kept record's
-- holders have not settled: provisional ones, or ones the store knows
-- nothing of.
local function unsettled(shard)
  if won or prov[shard] then return true end
  return redis.call('HEXISTS', KEYS[2], shard) == 0 and redis.call('HEXISTS', KEYS[4], shard) == 0 and
    redis.call('SISMEMBER', KEYS[3], shard) == 0
end
local function dropProv(shard)
  if prov[shard] then
    prov[shard] = nil
    local pat = ' ' .. string.gsub(shard, '%p', '%%%0') .. ' '
    provList = string.gsub(provList, pat, ' ', 1)
    settledList = string.gsub(settledList, pat, ' ', 1)
  end
end
-- Shards a holder of the kept record won back from a provisional state
-- (below), " a b ... ", until their reader closes them (close.lua): a
-- close of theirs another instance knows may be the newcomer's, learned
-- from the store before the holder re-seeded, and is not written back.
local reopenedList = redis.call('HGET', KEYS[1], '{{reopenedField}}') or ' '
local function reopened(shard) return string.find(reopenedList, ' ' .. shard .. ' ', 1, true) ~= nil end
-- Shards pruned as trimmed (prune) are not written back.
local prunedList = redis.call('HGET', KEYS[1], '{{prunedField}}') or ''
local function pruned(shard) return string.find(prunedList, ' ' .. shard .. ' ', 1, true) ~= nil end
-- The stream incarnation the seed's state belongs to, against the one
-- recorded since the store forgot. A seed of an earlier incarnation (the
-- stream was deleted and created again; another instance recorded the new
-- one) is stale: it writes no position, closed shard or lease, since they
-- are the deleted stream's and Kinesis has no record at those positions in
-- the new one, and its leases are lost. A seed of a later one finds the
-- deleted stream's state written back by an instance that had not seen the
-- new stream yet: that state is cleared as stream_created clears it (every
-- position and closed shard, hand-off requests, every lease fenced) and the
-- later time recorded. Only a later creation time clears, as there, so the
-- order the instances re-seed in does not matter (soak seed 7, 1 h: c18,
-- started from the group's listing of the deleted soak-dyn-2, re-seeded
-- first; b22, reading the new one, re-seeded second and lost its leases,
-- and c18's next listing then cleared the new stream's checkpoints and read
-- it again from its start). Marks are written forwards either way (one too
-- high only marks).
local recorded = redis.call('HGET', KEYS[1], '{{streamCreatedField}}')
local stale = false
if ARGV[7] ~= '' then
  if not recorded or tonumber(ARGV[7]) > tonumber(recorded) then
    if recorded then clear_incarnation(KEYS[2], KEYS[3], KEYS[4], KEYS[6]) end
    redis.call('HSET', KEYS[1], '{{streamCreatedField}}', ARGV[7])
  elseif tonumber(ARGV[7]) < tonumber(recorded) then
    stale = true
  end
end
local seeded = {}
local i = 8
for _ = 1, tonumber(ARGV[5]) do
  seeded[ARGV[i]] = ARGV[i + 1]
  local cur = redis.call('HGET', KEYS[2], ARGV[i])
  local ok = not pruned(ARGV[i]) and not stale and unsettled(ARGV[i])
  if ok and won then
    if cur then
      local _, _, _, valid = parse_pos(cur)
      ok = not valid or cmp_pos(ARGV[i + 1], cur) > 0
    end
  elseif ok then
    -- A seed of a record that lost resolved `latest` from its own, later
    -- start, and a holder of the kept record may be paused with an earlier
    -- position it cannot write back once the re-seed hold ran out. So it
    -- writes no position into a shard the store does not know (it gives
    -- that lease up, below, and whoever takes the shard reads from the
    -- start position, the kept record's `latest`), and into a provisional
    -- one only backwards: the earlier position stands, a re-read, never a
    -- skip. A position a holder of the kept record wrote it leaves alone
    -- (settled, above).
    ok = false
    if cur and not settled(ARGV[i]) then
      local _, _, atEnd, valid = parse_pos(cur)
      ok = valid and not atEnd and cmp_pos(ARGV[i + 1], cur) < 0
    end
  end
  if ok then
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
    if not won then
      addProv(ARGV[i])
    elseif prov[ARGV[i]] then
      if not settled(ARGV[i]) then settledList = settledList .. ARGV[i] .. ' ' end
      -- A lease of the shard is another record's (a newcomer's, or one a
      -- seed whose record lost kept): its reader reads on from its own,
      -- later `latest` start, and its commits would pass the settled
      -- position. It is freed, token kept, as a release would: that reader
      -- finds it gone at its next renewal or commit, re-seeds and loses it,
      -- and whoever takes the shard after the hold reads from the settled
      -- position.
      local o, _, t = parse_lease(redis.call('HGET', KEYS[4], ARGV[i]))
      if o and o ~= '' and o ~= ARGV[3] then redis.call('HSET', KEYS[4], ARGV[i], lease_value('', now, t)) end
    end
  end
  i = i + 2
end
if ARGV[6] ~= '' then redis.call('HSETNX', KEYS[2], '{{startField}}', ARGV[6]) end
local nclosed = tonumber(ARGV[i])
i = i + 1
for _ = 1, nclosed do
  -- A close is not written over a shard a holder won back from a
  -- provisional close (below), live or lapsed: its reader, or whoever
  -- takes it after, reads it from the holder's position and closes it at
  -- its end. A close the kept record's holders knew settles a provisional
  -- shard.
  -- A caller whose record lost closes no shard the store does not know,
  -- as it writes no position there: its reader read it from its own,
  -- later `latest` start, and whoever takes it reads it from the kept
  -- record's start and closes it at its end. Nor does it close a shard
  -- whose position a holder of the kept record wrote back (settled): the
  -- close would pass the records between that position and its reader's
  -- later start.
  if not pruned(ARGV[i]) and not stale and not reopened(ARGV[i]) and unsettled(ARGV[i]) and (won or (prov[ARGV[i]] and not settled(ARGV[i]))) then
    redis.call('SADD', KEYS[3], ARGV[i])
    redis.call('HSET', KEYS[2], ARGV[i], 'SHARD_END')
    if won then dropProv(ARGV[i]) else addProv(ARGV[i]) end
  end
  i = i + 1
end
-- How far the caller's reads delivered each shard (the redelivery mark),
-- only forwards and not for pruned shards: a mark never moves back, and
-- one too high only marks a record that was not delivered before.
local ndelivered = tonumber(ARGV[i])
i = i + 1
for _ = 1, ndelivered do
  if not pruned(ARGV[i]) then
    local cur = redis.call('HGET', KEYS[5], ARGV[i])
    local ahead = true
    if cur then
      local _, _, _, valid = parse_pos(cur)
      ahead = not valid or cmp_pos(ARGV[i + 1], cur) > 0
    end
    if ahead then redis.call('HSET', KEYS[5], ARGV[i], ARGV[i + 1]) end
  end
  i = i + 2
end
-- A store that forgot holds every shard it does not know for a lease period
-- (acquire), so that their holders re-seed them first. A seed of closes
-- alone (no position, no lease) on a store that kept the caller's record (a close written back) is
-- no such re-seed, and pauses no new shard.
if not stale and (found ~= ARGV[1] or tonumber(ARGV[5]) > 0 or i <= #ARGV) then redis.call('HSET', KEYS[1], '{{reseededField}}', now) end
local exp = now + tonumber(ARGV[4])
local out = {redis.call('HGET', KEYS[1], 'id'), tonumber(redis.call('HGET', KEYS[1], 'start')), found, exp, now, 0}
local done = {}
for j = i, #ARGV, 2 do
  local raw = redis.call('HGET', KEYS[4], ARGV[j])
  local owner, _, tok = parse_lease(raw)
  local want = tonumber(ARGV[j + 1])
  if stale then
    table.insert(out, ARGV[j])
    out[6] = out[6] + 1
  elseif won and prov[ARGV[j]] and owner ~= ARGV[3] and not pruned(ARGV[j]) then
    -- A holder of the kept record claims a provisional shard: whatever the
    -- replaced record's owners did with it (read on, closed it, released
    -- it, under any token: theirs started again at 1) came from a position
    -- its `latest` resolved, so the holder's position (or none, when it
    -- seeds none) replaces theirs, a close is undone, and the holder reads
    -- on: a re-read, never a skip.
    redis.call('HSET', KEYS[4], ARGV[j], lease_value(ARGV[3], exp, want))
    if redis.call('SREM', KEYS[3], ARGV[j]) == 1 and not reopened(ARGV[j]) then
      reopenedList = reopenedList .. ARGV[j] .. ' '
    end
    if seeded[ARGV[j]] then
      redis.call('HSET', KEYS[2], ARGV[j], seeded[ARGV[j]])
    else
      redis.call('HDEL', KEYS[2], ARGV[j])
    end
    dropProv(ARGV[j])
  elseif not won and prov[ARGV[j]] and not pruned(ARGV[j]) and redis.call('SISMEMBER', KEYS[3], ARGV[j]) == 1 then
    -- A caller whose record lost still reads a shard provisionally closed
    -- (by a newcomer from its own, later `latest`, or by another record
    -- that lost): the close may pass records its reader has not delivered.
    -- The close is undone and the caller reads on from its position (or
    -- none): a re-read, never a skip. The shard stays provisional, for a
    -- holder of the kept record to claim back.
    redis.call('HSET', KEYS[4], ARGV[j], lease_value(ARGV[3], exp, want))
    redis.call('SREM', KEYS[3], ARGV[j])
    if not reopened(ARGV[j]) then reopenedList = reopenedList .. ARGV[j] .. ' ' end
    if seeded[ARGV[j]] then
      redis.call('HSET', KEYS[2], ARGV[j], seeded[ARGV[j]])
    else
      redis.call('HDEL', KEYS[2], ARGV[j])
    end
  elseif not won and prov[ARGV[j]] and not pruned(ARGV[j]) and raw and owner == '' and tok == want then
    -- A caller whose record lost still reads a shard provisionally
    -- released under the token number it presents: by a newcomer, whose
    -- tokens started again at 1, from its own, later `latest`. As for a
    -- close (above), the caller reads on, and the shard keeps no position
    -- past its reader's: the earlier one this re-seed wrote, or none. A
    -- position a holder of the kept record wrote back (settled) stands,
    -- and the caller gives the shard up (below).
    if settled(ARGV[j]) then
      table.insert(out, ARGV[j])
      out[6] = out[6] + 1
    else
      redis.call('HSET', KEYS[4], ARGV[j], lease_value(ARGV[3], exp, want))
      if not seeded[ARGV[j]] then redis.call('HDEL', KEYS[2], ARGV[j]) end
    end
  elseif redis.call('SISMEMBER', KEYS[3], ARGV[j]) == 1 or (raw and owner == '' and tok == want) then
    -- Closed, or released under this very token: the reader is done.
    table.insert(done, ARGV[j])
  elseif not won and not raw and (not prov[ARGV[j]] or settled(ARGV[j]) or redis.call('HEXISTS', KEYS[2], ARGV[j]) == 0) then
    -- A caller whose record lost holds a shard the store does not know, or
    -- knows only by a position a holder of the kept record wrote back: its
    -- reader resolved `latest` from its own, later start, and a paused
    -- holder of the kept record may have read it from an earlier one. It
    -- gives the shard up, and whoever takes it after the re-seed hold reads
    -- from the start position or that kept position: a re-read, never a
    -- skip.
    table.insert(out, ARGV[j])
    out[6] = out[6] + 1
  elseif pruned(ARGV[j]) and not raw then
    -- Pruned as trimmed while its holder could not renew: lost.
    table.insert(out, ARGV[j])
    out[6] = out[6] + 1
  elseif not raw or (owner == ARGV[3] and tok == want) or (won and tok <= want) then
    -- Unknown to the store, the caller's own, or an older token's (the
    -- caller's take fenced it): the newer token wins. An equal one of
    -- another owner was handed out from the record the caller's replaced,
    -- by a newcomer that found the store empty: the holder wins it back.
    -- A caller whose record lost compares no tokens with the kept
    -- record's holders: its own started again at 1.
    redis.call('HSET', KEYS[4], ARGV[j], lease_value(ARGV[3], exp, want))
    if not won then addProv(ARGV[j]) end
    if raw and owner ~= ARGV[3] and owner ~= '' then
      -- The other owner may have committed from a start the caller's reader
      -- is behind: the shard's position is the caller's again (a re-read,
      -- never a skip), or none when it seeds none.
      if seeded[ARGV[j]] then
        redis.call('HSET', KEYS[2], ARGV[j], seeded[ARGV[j]])
      else
        redis.call('HDEL', KEYS[2], ARGV[j])
      end
    end
  else
    table.insert(out, ARGV[j])
    out[6] = out[6] + 1
  end
end
if provList == ' ' then
  redis.call('HDEL', KEYS[1], '{{provisionalField}}')
else
  redis.call('HSET', KEYS[1], '{{provisionalField}}', provList)
end
if settledList == ' ' then
  redis.call('HDEL', KEYS[1], '{{settledField}}')
else
  redis.call('HSET', KEYS[1], '{{settledField}}', settledList)
end
if reopenedList ~= ' ' then redis.call('HSET', KEYS[1], '{{reopenedField}}', reopenedList) end
for _, s in ipairs(done) do table.insert(out, s) end
return out
