package checkpointer

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// GroupStreams returns the stream identities (ARNs, or names where the
// service gives none) the group has keys for, sorted: every key
// `<prefix>:{<group>:<stream>}:<name>`, found with SCAN on every master
// (on a Cluster each node holds some slots). For the operator commands: the
// input never scans. SCAN may return a key twice and, while keys change,
// miss one written meanwhile; a stream with state is listed all the same
// (it has several keys, most of them long-lived).
func (c *Checkpointer) GroupStreams(ctx context.Context) ([]string, error) {
	head := c.cfg.KeyPrefix + ":{" + c.cfg.Group + ":"
	match := globEscape(head) + "*"
	var (
		mu    sync.Mutex
		found = map[string]bool{}
	)
	scan := func(ctx context.Context, cl redis.Cmdable) error {
		it := cl.Scan(ctx, 0, match, 1000).Iterator()
		for it.Next(ctx) {
			if id, ok := streamOfKey(it.Val(), head); ok {
				mu.Lock()
				found[id] = true
				mu.Unlock()
			}
		}
		return it.Err()
	}
	var err error
	if cl, ok := c.client.(*redis.ClusterClient); ok {
		err = cl.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return scan(ctx, n) })
	} else {
		err = scan(ctx, c.client)
	}
	if err != nil {
		return nil, fmt.Errorf("listing the streams of group %s: %w", c.cfg.Group, err)
	}
	out := make([]string, 0, len(found))
	for id := range found {
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}

// streamOfKey returns the stream of a key `<head><stream>}:<name>`. A
// stream identity holds no '}' (ARNs and stream names cannot), so the
// last "}:" ends it. A stream of another group whose name starts with this
// one's and ':' is not taken for one of this group's.
func streamOfKey(key, head string) (string, bool) {
	rest, ok := strings.CutPrefix(key, head)
	if !ok {
		return "", false
	}
	i := strings.LastIndex(rest, "}:")
	if i <= 0 {
		return "", false
	}
	id := rest[:i]
	// The keys of a group named "<group>:x" start alike; their stream part
	// ("x:arn:...", "x:name") is neither a stream's ARN nor its name. A
	// group named "<group>:arn" makes it start with "arn:" too, so an id
	// with a colon must have the whole shape of a stream ARN.
	if strings.Contains(id, ":") && !streamARN.MatchString(id) {
		return "", false
	}
	return id, true
}

// streamARN is the shape of a Kinesis stream's ARN:
// arn:<partition>:kinesis:<region>:<account>:stream/<name>.
var streamARN = regexp.MustCompile(`^arn:[^:]+:kinesis:[^:]*:[^:]*:stream/[^:/]+$`)

// globEscape escapes the characters SCAN's MATCH reads as a pattern.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
