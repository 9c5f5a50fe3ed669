-- KEYS[1]: the group's instances hash. ARGV: id, nonce. A process that
-- stops gives its id up, so a restart under it is not made to wait; an
-- entry another process claimed since is left alone.
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur and string.match(cur, '^(.*)|%d+$') == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
