if ARGV[1] ~= '' and not epoch_ok(KEYS[2], ARGV[1]) then return forgot(KEYS[2]) end
return {redis.call('SMEMBERS', KEYS[1]), redis.call('HGET', KEYS[2], '{{provisionalField}}') or ''}
