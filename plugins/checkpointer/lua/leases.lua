local out = {now_ms()}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all do out[i + 1] = all[i] end
return out
