-- KEYS: the members keys of several streams of one input; ARGV: the
-- member. Records it alive now in each, by Redis TIME, and returns now.
-- One call for every stream, where heartbeat.lua is one per stream: only a
-- Redis that is not a Cluster takes it.
local now = now_ms()
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, now, ARGV[1])
end
return now
