if ARGV[1] ~= '' and not epoch_ok(KEYS[1], ARGV[1]) then return forgot(KEYS[1]) end
return 1
