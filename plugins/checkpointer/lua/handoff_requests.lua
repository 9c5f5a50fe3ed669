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
