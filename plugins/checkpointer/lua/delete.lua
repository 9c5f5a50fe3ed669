-- Instances still running would take the deletion for a store that forgot
-- the group and write back what they know at once, undoing it: refuse while
-- any member heartbeat within the last ARGV[2] ms, forced or not.
local now = now_ms()
local running = redis.call('ZRANGEBYSCORE', KEYS[4], now - tonumber(ARGV[2]), '+inf')
if #running > 0 then
  table.insert(running, 1, -1)
  return running
end
local _, reply, refused = refuse_live(KEYS[3], ARGV[1])
if refused then return reply end
-- A field written into a hash deleted next: a delete of keys already gone
-- (a retry) still propagates a write for the WAIT after it to cover.
redis.call('HSET', KEYS[1], '_deleting', '1')
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
return reply
