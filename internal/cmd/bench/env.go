package main

import (
	"context"
	"fmt"
	"os"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// envOptions says what a bench part runs against.
type envOptions struct {
	// mock starts kinesis-mock instead of kinesalite: it serves enhanced
	// fan-out, kinesalite is faster for everything else.
	mock bool
	// shardLimit is kinesalite's account shard limit (0: testenv's default).
	shardLimit int
	// redis starts a redis-server for the input's checkpoints too.
	redis bool
}

// benchEnv is the emulator and, if asked for, the Redis one bench part
// runs against; Close stops both.
type benchEnv struct {
	emu *testenv.Kinesis
	red *testenv.Redis
}

// startEnv starts what o asks for. On an error nothing is left running.
func startEnv(ctx context.Context, o envOptions) (*benchEnv, error) {
	e := &benchEnv{}
	var err error
	if o.mock {
		if e.emu, err = testenv.StartKinesisMock(ctx); err != nil {
			return nil, fmt.Errorf("starting kinesis-mock: %w", err)
		}
	} else if e.emu, err = testenv.StartKinesaliteWith(ctx, testenv.KinesaliteOptions{ShardLimit: o.shardLimit}); err != nil {
		return nil, fmt.Errorf("starting kinesalite: %w", err)
	}
	if o.redis {
		if e.red, err = testenv.StartRedis(ctx, testenv.RedisOptions{}); err != nil {
			e.emu.Close()
			return nil, fmt.Errorf("starting redis-server: %w", err)
		}
	}
	return e, nil
}

// Close stops Redis and the emulator.
func (e *benchEnv) Close() {
	if e.red != nil {
		e.red.Close()
	}
	e.emu.Close()
}

// setAWSEnv points the default credential chain, which the plugins read
// when a config names no credentials, at the emulators' static keys.
func setAWSEnv() {
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": testenv.AccessKey, "AWS_SECRET_ACCESS_KEY": testenv.SecretKey,
		"AWS_REGION": testenv.Region, "AWS_EC2_METADATA_DISABLED": "true",
	} {
		_ = os.Setenv(k, v)
	}
}
