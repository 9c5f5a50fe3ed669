-- KEYS ckpt, closed, lease, members, handoff, progress, epoch, delivered of one
-- group+stream; ARGV member window (ms), fence (ms, Redis clock). Deletes
-- every key of a stream the group released longer ago than
-- deleted_stream_retention. Refuses ({0}) while a lease is live or a
-- member heartbeat within the window: an instance still reads it (a
-- listing missed it, or an instance runs an older configuration). Fenced
-- ({-1}) from the fence on, which discovery_fence gave the caller: from
-- then another instance may hold the group's discovery lease and have
-- found the stream again.
local now = now_ms()
if now >= tonumber(ARGV[2]) then return -1 end
local running = redis.call('ZRANGE', KEYS[4], now - tonumber(ARGV[1]), '+inf', 'BYSCORE', 'LIMIT', 0, 1)
if #running > 0 then return 0 end
local leases = redis.call('HGETALL', KEYS[3])
for i = 1, #leases, 2 do
  local owner, exp = parse_lease(leases[i + 1])
  if live(owner, exp, now) then return 0 end
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
return 1
