local now = now_ms()
local eid = redis.call('HGET', KEYS[4], 'id')
if ARGV[4] == '' then
  if not eid then
    eid = ARGV[5]
    redis.call('HSET', KEYS[4], 'id', eid, 'start', now, '{{createdField}}', now)
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
  -- A live lease is never taken, not even one held under the caller's own
  -- instance id: a caller takes only shards it does not read, so such a
  -- lease is another process's under the same id (a copy started with the
  -- same lease.instance_id, or the run before a restart). It is taken once
  -- it runs out, with a new token that fences that process out.
  return {0, owner, exp, tok, now, eid, gstart, '', '', -1, ''}
else
  -- After a re-seed, a shard the store does not know waits ARGV[6] (a
  -- lease period and the newcomer wait) for a holder that was paused or
  -- cut off while the store forgot: it wakes within its lease and re-seeds
  -- within a check interval of waking.
  -- A provisional shard (reseed.lua: its state was written under a group
  -- record a re-seed replaced) waits alike, as its holder may yet claim it
  -- back; a take after that settles it.
  local reseeded = tonumber(redis.call('HGET', KEYS[4], 'reseeded')) or 0
  local hold = tonumber(ARGV[6])
  local prov = raw and provisional(KEYS[4], ARGV[1])
  if (not raw or prov) and now < reseeded + hold then
    return {0, '', reseeded + hold, 0, now, eid, gstart, '', '', -1, ''}
  end
  if prov then
    local list = redis.call('HGET', KEYS[4], '{{provisionalField}}')
    list = string.gsub(list, ' ' .. string.gsub(ARGV[1], '%p', '%%%0') .. ' ', ' ', 1)
    if list == ' ' then
      redis.call('HDEL', KEYS[4], '{{provisionalField}}')
    else
      redis.call('HSET', KEYS[4], '{{provisionalField}}', list)
    end
    list_drop(KEYS[4], '{{settledField}}', ARGV[1])
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
local start = redis.call('HGET', KEYS[3], '{{startField}}') or ''
-- How far earlier owners may have delivered: the new reader marks what it
-- reads again up to there. Their writes are fenced by the token this take
-- replaced, so none can deliver past what is read here.
local delivered = redis.call('HGET', KEYS[5], ARGV[1]) or ''
return {1, owner, exp, tok, now, eid, gstart, ck, start, quiet, delivered}
