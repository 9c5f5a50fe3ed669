local _, reply, refused = refuse_live(KEYS[3], ARGV[1])
if refused then return reply end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7])
return reply
