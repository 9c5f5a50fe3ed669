return publish_progress(KEYS[1], KEYS[2], ARGV[1], ARGV, 2, #ARGV)
