package testenv

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// Redis72Env names a redis-server (or valkey-server) of version 7.2 or
// later for the tests that need one: a path, or a name looked up in PATH.
// Without it, valkey-server is used when PATH has it (every Valkey release
// follows Redis 7.2).
const Redis72Env = "CONNECT_KINESIS_REDIS72"

// serverVersion matches the version in `redis-server --version` (Redis:
// "v=7.2.4", Valkey: "v=8.0.1").
var serverVersion = regexp.MustCompile(`v=(\d+)\.(\d+)\.`)

// Redis72 returns a server program of Redis 7.2 or later (Valkey included),
// for RedisOptions.Server, or skips the test saying why none is there.
// From 7.2 a connection's WAIT covers only what that connection
// propagated, where 7.0 waits for the master's whole offset: tests of code
// that relies on WAIT run on both where they can.
func Redis72(tb testing.TB) string {
	tb.Helper()
	prog := os.Getenv(Redis72Env)
	if prog == "" {
		if _, err := exec.LookPath("valkey-server"); err != nil {
			tb.Skipf("no Redis 7.2 or later here: set %s to the path of a redis-server 7.2+ or valkey-server (PATH has no valkey-server)", Redis72Env)
		}
		prog = "valkey-server"
	}
	ctx, cancel := context.WithTimeout(tb.Context(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, prog, "--version").Output()
	if err != nil {
		tb.Fatalf("%s=%s: running --version: %v", Redis72Env, prog, err)
	}
	m := serverVersion.FindSubmatch(out)
	if m == nil {
		tb.Fatalf("%s=%s: no version in %q", Redis72Env, prog, out)
	}
	major, _ := strconv.Atoi(string(m[1]))
	minor, _ := strconv.Atoi(string(m[2]))
	if major < 7 || major == 7 && minor < 2 {
		tb.Skipf("%s is version %d.%d, not 7.2 or later: set %s to a newer server", prog, major, minor, Redis72Env)
	}
	return prog
}
