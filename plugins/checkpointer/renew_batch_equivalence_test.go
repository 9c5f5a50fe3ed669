package checkpointer

import (
	"context"
	"fmt"
	"math/rand"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// perLeaseRenewal and perLeaseProgress are renew_leases and
// publish_progress as they were before their reads became HMGET and their
// writes one HSET (in chunks of chunk_fields): one HGET and one HSET per
// lease. They are the reference the batched prelude must match.
const perLeaseRenewal = `local function renew_leases(lease_key, epoch_key, owner, period, known, args, from, to)
  if not epoch_ok(epoch_key, known) then return nil end
  local pruned
  local values = {}
  for i = from, to, 2 do
    values[i] = redis.call('HGET', lease_key, args[i])
    if not values[i] then
      pruned = pruned or redis.call('HGET', epoch_key, '{{prunedField}}') or ''
      if not string.find(pruned, ' ' .. args[i] .. ' ', 1, true) then return nil end
    end
  end
  local now = now_ms()
  local exp = now + tonumber(period)
  local out = {exp, now}
  local unsure = false
  for i = from, to, 2 do
    local o, _, tok = parse_lease(values[i])
    if o == owner and tok == tonumber(args[i + 1]) then
      redis.call('HSET', lease_key, args[i], lease_value(o, exp, tok))
    else
      table.insert(out, args[i])
      unsure = unsure or provisional(epoch_key, args[i])
    end
  end
  if unsure then return nil end
  return out
end`

const perLeaseProgress = `local function publish_progress(progress_key, lease_key, owner, args, from, to)
  local n = 0
  for i = from, to, 4 do
    local o = parse_lease(redis.call('HGET', lease_key, args[i]))
    if o == owner then
      redis.call('HSET', progress_key, args[i], args[i + 1] .. '|' .. args[i + 2] .. '|' .. owner .. '|bps=' .. args[i + 3])
      n = n + 1
    end
  end
  return n
end`

// TestIntegrationBatchedRenewalAndProgressMatchThePerLeaseLoop runs
// renew_all, renew_streams, publish_progress and publish_progresses on
// random stores twice, once with the prelude's batched renew_leases and
// publish_progress and once with the per-lease loops they replaced, and
// requires the same reply and the same keys afterwards: leases missing
// (pruned or not), another owner's, released or malformed; a token that
// differs; provisional shards (the renewals before the early return stay
// written); the group record replaced; a shard named twice in one call;
// no lease; and 999 to 2,500 leases, across the chunks of 1,000 fields.
// On a redis-server and on miniredis (the store simulation's).
func TestIntegrationBatchedRenewalAndProgressMatchThePerLeaseLoop(t *testing.T) {
	t.Parallel()
	funcs, _ := preludeFunctions(luaPrelude)
	ref := strings.Replace(luaPrelude, funcs["renew_leases"], luaFields.Replace(perLeaseRenewal), 1)
	ref = strings.Replace(ref, funcs["publish_progress"], perLeaseProgress, 1)
	require.NotEqual(t, luaPrelude, ref)
	require.NotContains(t, ref, "hmget(lease_key")
	names := []string{"renew_all", "renew_streams", "publish_progress", "publish_progresses"}
	batched, perLease := map[string]*redis.Script{}, map[string]*redis.Script{}
	for _, n := range names {
		batched[n] = scripts[n].script
		perLease[n] = redis.NewScript("\n" + ref + "\n" + luaFields.Replace(readLua(n)))
	}

	r := testenv.NewRedis(t)
	server := r.Client()
	defer server.Close()
	m := miniredis.RunT(t)
	mini := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer mini.Close()
	for _, srv := range []struct {
		name      string
		c         redis.UniversalClient
		scenarios int
	}{{"redis-server", server, 150}, {"miniredis", mini, 60}} {
		t.Run(srv.name, func(t *testing.T) {
			for i := 0; i < srv.scenarios; i++ {
				sc := newRenewalScenario(rand.New(rand.NewSource(int64(i))))
				for _, script := range names {
					wantReply, wantKeys := sc.run(t, srv.c, perLease[script], script, fmt.Sprintf("ref%d", i))
					gotReply, gotKeys := sc.run(t, srv.c, batched[script], script, fmt.Sprintf("new%d", i))
					require.Equal(t, wantReply, gotReply, "scenario %d, %s: the reply", i, script)
					require.Equal(t, wantKeys, gotKeys, "scenario %d, %s: the keys written", i, script)
				}
			}
		})
	}
}

// renewalStream is one stream of a renewalScenario: its keys' contents and
// the shard, token pairs presented for it.
type renewalStream struct {
	leases, epoch, progress map[string]string
	shards, tokens          []string
}

type renewalScenario struct{ streams []renewalStream }

func newRenewalScenario(rng *rand.Rand) renewalScenario {
	n := 1 + rng.Intn(8)
	big := rng.Intn(5) == 0
	if big {
		n = []int{999, 1000, 1001, 1999, 2000, 2001, 2500}[rng.Intn(7)]
	}
	pool := make([]string, n+2)
	for i := range pool {
		pool[i] = fmt.Sprintf("shardId-%d", i)
	}
	var sc renewalScenario
	for range 1 + rng.Intn(3) {
		st := renewalStream{leases: map[string]string{}, epoch: map[string]string{"id": "E"}, progress: map[string]string{}}
		clean := (big && rng.Intn(3) != 0) || rng.Intn(5) == 0
		// Most leases the caller's, under the token it presents: more
		// than a chunk of writes.
		aligned := clean && rng.Intn(2) == 0
		tokens := map[string]int{}
		if !clean && rng.Intn(10) == 0 {
			st.epoch["id"] = "other"
		}
		var pruned, prov []string
		for _, s := range pool {
			switch k := rng.Intn(10); {
			case k == 0 && !clean: // no lease
			case k == 1 && !aligned:
				st.leases[s] = fmt.Sprintf("|%d|%d", 1000+rng.Intn(5), rng.Intn(4))
			case k == 2 && !aligned:
				st.leases[s] = "malformed"
			default:
				owner := []string{"me", "me", "me", "other", "m|e", ""}[rng.Intn(6)]
				if aligned && rng.Intn(20) != 0 {
					owner = "me"
				}
				tokens[s] = 1 + rng.Intn(3)
				st.leases[s] = fmt.Sprintf("%s|%d|%d", owner, 1000+rng.Intn(5), tokens[s])
			}
			if rng.Intn(3) == 0 {
				pruned = append(pruned, s)
			}
			if rng.Intn(4) == 0 {
				prov = append(prov, s)
			}
			if rng.Intn(3) == 0 {
				st.progress[s] = "earlier"
			}
		}
		if len(pruned) > 0 {
			st.epoch[prunedField] = " " + strings.Join(pruned, " ") + " "
		}
		if len(prov) > 0 && !clean && rng.Intn(2) == 0 {
			st.epoch[provisionalField] = " " + strings.Join(prov, " ") + " "
		}
		k := rng.Intn(n + 3)
		if big && rng.Intn(2) == 0 {
			k = n
		}
		for i := 0; i < k; i++ {
			s := pool[rng.Intn(len(pool))] // a shard may come twice
			if k == n && rng.Intn(50) != 0 {
				s = pool[i]
			}
			st.shards = append(st.shards, s)
			tok := 1 + rng.Intn(3)
			if aligned && tokens[s] > 0 && rng.Intn(50) != 0 {
				tok = tokens[s]
			}
			st.tokens = append(st.tokens, strconv.Itoa(tok))
		}
		sc.streams = append(sc.streams, st)
	}
	return sc
}

// expiry is a lease expiry or a Redis time in a reply: a renewal's are
// the clock's, so they are compared as "T".
var expiry = regexp.MustCompile(`\b\d{12,}\b`)

// run writes the scenario under keys tagged tag, runs script (by its file
// name) on it and returns the reply and every key's fields afterwards.
func (sc renewalScenario) run(t *testing.T, c redis.UniversalClient, s *redis.Script, script, tag string) (string, []string) {
	t.Helper()
	ctx := context.Background()
	var leaseKeys, epochKeys, progressKeys []string
	for k, st := range sc.streams {
		prefix := fmt.Sprintf("{%s:%d}:", tag, k)
		lk, ek, pk := prefix+"leases", prefix+"epoch", prefix+"progress"
		require.NoError(t, c.Del(ctx, lk, ek, pk).Err())
		for key, h := range map[string]map[string]string{lk: st.leases, ek: st.epoch, pk: st.progress} {
			if len(h) > 0 {
				require.NoError(t, c.HSet(ctx, key, h).Err())
			}
		}
		leaseKeys, epochKeys, progressKeys = append(leaseKeys, lk), append(epochKeys, ek), append(progressKeys, pk)
	}
	first := sc.streams[0]
	var keys []string
	var args []any
	switch script {
	case "renew_all":
		if len(first.shards) == 0 { // RenewAll sends none
			return "", nil
		}
		keys, args = []string{leaseKeys[0], epochKeys[0]}, []any{"me", 10000, "E"}
		for i, s := range first.shards {
			args = append(args, s, first.tokens[i])
		}
	case "renew_streams":
		args = []any{"me", 10000}
		for k, st := range sc.streams {
			keys = append(keys, leaseKeys[k], epochKeys[k])
			args = append(args, "E", len(st.shards))
			for i, s := range st.shards {
				args = append(args, s, st.tokens[i])
			}
		}
	case "publish_progress":
		if len(first.shards) == 0 { // PublishProgress sends none
			return "", nil
		}
		keys, args = []string{progressKeys[0], leaseKeys[0]}, []any{"me"}
		for i, s := range first.shards {
			args = append(args, s, i, 2*i, 3*i)
		}
	case "publish_progresses":
		args = []any{"me"}
		for k, st := range sc.streams {
			keys = append(keys, progressKeys[k], leaseKeys[k])
			args = append(args, len(st.shards))
			for i, s := range st.shards {
				args = append(args, s, i, k, 3*i)
			}
		}
	}
	v, err := s.Run(ctx, c, keys, args...).Result()
	reply := fmt.Sprint(v)
	if err != nil {
		reply = "error " + err.Error()
		if err == redis.Nil {
			reply = "nil"
		}
	}
	var state []string
	for _, key := range slices.Concat(leaseKeys, epochKeys, progressKeys) {
		h, err := c.HGetAll(ctx, key).Result()
		require.NoError(t, err)
		_, name, _ := strings.Cut(key, "}:")
		for f, v := range h {
			state = append(state, fmt.Sprintf("%s:%s:%s=%s", name, strings.Split(key, ":")[1], f, expiry.ReplaceAllString(v, "T")))
		}
	}
	slices.Sort(state)
	return expiry.ReplaceAllString(reply, "T"), state
}
