-- What `checkpoints export` writes, read in one script so that no commit or
-- close falls between its parts: the checkpoint hash (checkpoints, start
-- override, per-shard starts), the closed set and the redelivery marks.
-- KEYS ckpt, closed, delivered. Writes nothing.
return {redis.call('HGETALL', KEYS[1]), redis.call('SMEMBERS', KEYS[2]), redis.call('HGETALL', KEYS[3])}
