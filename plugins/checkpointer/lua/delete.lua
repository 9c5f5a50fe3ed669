-- Instances still running would take the deletion for a store that forgot
-- the group and write back what they know at once, undoing it: refuse while
-- any member heartbeat within the last ARGV[2] ms, forced or not.
local now = now_ms()
local running = redis.call('ZRANGEBYSCORE', KEYS[4], now - tonumber(ARGV[2]), '+inf')
-- ARGV[2] is the command's lease period, not the pipelines' (Redis does not
-- hold theirs). A member holding a live lease renewed it within its own
-- lease period, however long: it runs too, whatever its last heartbeat.
local seen, members = {}, {}
for _, m in ipairs(running) do seen[m] = true end
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', '+inf')) do members[m] = true end
local held = redis.call('HGETALL', KEYS[3])
for i = 1, #held, 2 do
  local owner, exp = parse_lease(held[i + 1])
  if live(owner, exp, now) and members[owner] and not seen[owner] then
    seen[owner] = true
    table.insert(running, owner)
  end
end
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
