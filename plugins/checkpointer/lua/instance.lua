-- KEYS[1]: the group's instances hash, id -> "<nonce>|<lastBeatMillis>".
-- ARGV: id, nonce (this process's), period ms, mode ('claim' or 'keep'),
-- and for a claim the last beat of another process it saw under the id
-- (ms, 0 if none).
-- Records that the process with nonce runs under id now, unless another
-- process holds the id: one whose last beat is within the period. On a
-- keep that one claimed the id after this process's beat had lapsed, so
-- this process is the one to stop; another nonce with a lapsed beat is no
-- running process (an entry from before a restart of Redis from an older
-- snapshot, or a promoted replica), and the keep writes over it. A claim also
-- deletes the entries of every id whose beat lapsed, so the hash holds
-- only the running processes and those that died within a period.
-- Returns {1, nonce, now, now} when the caller holds the id, else
-- {0, holderNonce, holderBeat, now}.
local now = now_ms()
local period = tonumber(ARGV[3])
if ARGV[4] == 'claim' then
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    local beat = tonumber(string.match(all[i + 1], '|(%d+)$') or '0')
    if all[i] ~= ARGV[1] and beat <= now - period then redis.call('HDEL', KEYS[1], all[i]) end
  end
end
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then
  local nonce, beat = string.match(cur, '^(.*)|(%d+)$')
  beat = tonumber(beat or '0')
  if nonce ~= ARGV[2] and beat > now - period then
    return {0, nonce or '', beat, now}
  end
end
-- The id beat under another process less than a period ago and its entry
-- is gone: that process gave the id up (a graceful stop), or Redis forgot
-- it (restarted empty, flushed) while it runs. Which one cannot be told
-- here, so the claim waits until that beat would have lapsed: a running
-- process beats again before then, and the claim is refused.
local seen = tonumber(ARGV[5] or '0') or 0
if ARGV[4] == 'claim' and not cur and seen > now - period then
  return {0, '', seen, now}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. '|' .. now)
return {1, ARGV[2], now, now}
