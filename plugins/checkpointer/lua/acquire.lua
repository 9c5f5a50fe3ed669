local now = now_ms()
local eid = redis.call('HGET', KEYS[4], 'id')
if ARGV[3] == '' then
  if not eid then
    eid = ARGV[4]
    redis.call('HSET', KEYS[4], 'id', eid, 'start', now, '{{createdField}}', now)
  end
elseif eid ~= ARGV[3] then
  return forgot(KEYS[4])
end
local gstart = tonumber(redis.call('HGET', KEYS[4], 'start')) or 0
local period = tonumber(ARGV[2])
local hold = tonumber(ARGV[5])
local reseeded = tonumber(redis.call('HGET', KEYS[4], 'reseeded')) or 0
local reply = {now, eid, gstart}
-- Each shard is taken as a call of its own would take it, in the order
-- given; the batch only saves the round trips.
for i = 6, #ARGV do
  local shard = ARGV[i]
  local raw = redis.call('HGET', KEYS[1], shard)
  local owner, exp, tok = parse_lease(raw)
  -- How long ago the previous holder's lease ended (it expired, or was
  -- released at that time), or -1 when unknown.
  local quiet = -1
  local took = 1
  if live(owner, exp, now) then
    -- A live lease is never taken, not even one held under the caller's
    -- own instance id: a caller takes only shards it does not read, so
    -- such a lease is another process's under the same id (a copy
    -- started with the same lease.instance_id, or the run before a
    -- restart). It is taken once it runs out, with a new token that
    -- fences that process out.
    took = 0
  else
    -- After a re-seed, a shard the store does not know waits ARGV[5] (a
    -- lease period and the newcomer wait) for a holder that was paused
    -- or cut off while the store forgot: it wakes within its lease and
    -- re-seeds within a check interval of waking.
    -- A provisional shard (reseed.lua: its state was written under a
    -- group record a re-seed replaced) waits alike, as its holder may yet
    -- claim it back; a take after that settles it.
    local prov = raw and provisional(KEYS[4], shard)
    if (not raw or prov) and now < reseeded + hold then
      took, owner, exp, tok = 0, '', reseeded + hold, 0
    else
      if prov then
        local list = redis.call('HGET', KEYS[4], '{{provisionalField}}')
        list = string.gsub(list, ' ' .. string.gsub(shard, '%p', '%%%0') .. ' ', ' ', 1)
        if list == ' ' then
          redis.call('HDEL', KEYS[4], '{{provisionalField}}')
        else
          redis.call('HSET', KEYS[4], '{{provisionalField}}', list)
        end
        list_drop(KEYS[4], '{{settledField}}', shard)
      end
      if raw and exp > 0 then quiet = now - exp end
      owner = ARGV[1]
      tok = tok + 1
      exp = now + period
      redis.call('HSET', KEYS[1], shard, lease_value(owner, exp, tok))
      -- A request to hand the shard over was meant for the previous holder.
      redis.call('HDEL', KEYS[2], shard)
    end
  end
  local ck, start, delivered, own = '', '', '', ''
  if took == 1 then
    ck = redis.call('HGET', KEYS[3], shard) or ''
    start = redis.call('HGET', KEYS[3], '{{startField}}') or ''
    -- How far earlier owners may have delivered: the new reader marks
    -- what it reads again up to there. Their writes are fenced by the
    -- token this take replaced, so none can deliver past what is read
    -- here.
    delivered = redis.call('HGET', KEYS[5], shard) or ''
    -- The shard's own start matters only without a checkpoint.
    if ck == '' then
      own = redis.call('HGET', KEYS[3], '{{shardStartPrefix}}' .. shard) or ''
    end
  end
  local n = #reply
  reply[n + 1], reply[n + 2], reply[n + 3], reply[n + 4] = took, owner, exp, tok
  reply[n + 5], reply[n + 6], reply[n + 7], reply[n + 8], reply[n + 9] = ck, start, quiet, delivered, own
end
return reply
