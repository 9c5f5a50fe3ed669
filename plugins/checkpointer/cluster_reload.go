package checkpointer

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// clusterReloadHook makes a Cluster client reload its slot map after a
// call failed without an answer from Redis (a refused dial, a cut
// connection, a timeout) or with CLUSTERDOWN. go-redis reloads it on MOVED and ASK, and
// otherwise only once it is older than ClusterStateReloadInterval (60 s):
// when a master dies and its replica takes its slots over, no node answers
// MOVED for them (the dead one cannot), so every call of those slots went
// on dialling the dead master for up to a minute, long past any lease.
// The reload is lazy (in the background, one at a time), so the failed
// call is not slowed and the next ones find the new master as soon as the
// cluster names it.
type clusterReloadHook struct {
	// reload asks the client for a lazy reload (ClusterClient.ReloadState).
	reload func(ctx context.Context)
}

func (h clusterReloadHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h clusterReloadHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.reloadAfter(ctx, err)
		return err
	}
}

func (h clusterReloadHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.reloadAfter(ctx, err)
		return err
	}
}

// reloadAfter asks for a reload when err is no answer of Redis, or a
// CLUSTERDOWN: a redis.Error (a script's error, NOSCRIPT, a refused
// permission) and redis.Nil come from a node that is up, and a call its
// caller cancelled says nothing of the node. A master cut off from the
// rest of its cluster answers CLUSTERDOWN for the slots its promoted
// replica now serves, never MOVED, so without a reload the calls of those
// slots would go on asking it until the periodic reload; during a
// failover the live masters answer it too, and the reload, lazy and one
// at a time, costs one slot-map read.
func (h clusterReloadHook) reloadAfter(ctx context.Context, err error) {
	var answer redis.Error
	if err == nil || (errors.As(err, &answer) && !redis.IsClusterDownError(err)) || errors.Is(err, context.Canceled) {
		return
	}
	h.reload(ctx)
}
