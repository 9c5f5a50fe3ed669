package checkpointer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// inputScripts are the scripts the input runs. The commands they call are
// what its Redis user must be allowed besides PING, EVALSHA and EVAL
// (docs/deploy.md, config/deploy/redis-acl.conf).
var inputScripts = []string{"acquire", "renew", "renew_all", "release", "commit", "close", "closed", "reseed", "leases",
	"heartbeat", "live_members", "remove_member", "request_handoff", "handoff_requests", "publish_progress",
	"join", "stream_created", "prune", "discovery_claim", "discovery_publish", "discovery_forget", "discovery_fence", "prune_stream", "delivered",
	"groups", "heartbeats", "renew_streams", "publish_progresses", "round", "instance", "leave_instance"}

// permissionsScript: KEYS scratch hash, set and sorted set; ARGV command
// names. Returns the names Redis refused ("<name>?" for one it has no
// probe for).
var permissionsScript = newScript("permission_check")

// calledCommands finds the commands a script's source calls.
var calledCommands = regexp.MustCompile(`redis\.p?call\('([A-Za-z]+)'`)

// scriptCommands lists, sorted and in upper case, the commands the named
// scripts call: their bodies' own, the prelude's top-level code's, and
// those of the prelude functions a body calls (directly or through another
// prelude function). A prelude function no body of the role calls (reset's
// fence_all, which writes leases) grants the role nothing.
func scriptCommands(names []string) []string {
	key := strings.Join(names, "\x00")
	if cached, ok := scriptCommandsCache.Load(key); ok {
		return slices.Clone(cached.([]string))
	}
	cmds := parseScriptCommands(names)
	scriptCommandsCache.Store(key, cmds)
	return slices.Clone(cmds)
}

// scriptCommandsCache holds scriptCommands' answer per list of names: the
// scripts' sources are fixed when the package is initialised, and parsing
// them at every join (each connection's permission check) took a sixth of
// the store simulation's time.
var scriptCommandsCache sync.Map

// parseScriptCommands is scriptCommands without its cache.
func parseScriptCommands(names []string) []string {
	seen := map[string]bool{}
	add := func(src string) {
		for _, m := range calledCommands.FindAllStringSubmatch(src, -1) {
			seen[strings.ToUpper(m[1])] = true
		}
	}
	funcs, top := preludeFunctions(luaPrelude)
	add(top)
	for _, name := range names {
		body := strings.TrimPrefix(scripts[name].src, "\n"+luaPrelude)
		add(body)
		used := map[string]bool{}
		var use func(src string)
		use = func(src string) {
			for fn, fsrc := range funcs {
				if !used[fn] && strings.Contains(src, fn+"(") {
					used[fn] = true
					add(fsrc)
					use(fsrc)
				}
			}
		}
		use(body)
		use(top)
	}
	return slices.Sorted(maps.Keys(seen))
}

// preludeFunction matches one `local function name(...)` of the prelude,
// through its closing `end` at the start of a line.
var preludeFunction = regexp.MustCompile(`(?ms)^local function ([A-Za-z_][A-Za-z0-9_]*)\(.*?^end$`)

// preludeFunctions splits the prelude into its functions (name -> source)
// and the rest.
func preludeFunctions(prelude string) (map[string]string, string) {
	funcs := map[string]string{}
	for _, m := range preludeFunction.FindAllStringSubmatch(prelude, -1) {
		funcs[m[1]] = m[0]
	}
	return funcs, preludeFunction.ReplaceAllString(prelude, "")
}

// checkInputPermissions tries every command the input's scripts call, on
// scratch keys under the group's hash tag, and those it sends outside them
// (permission_check_conn.go), so that a Redis user without one fails the
// input's connection at once, naming what it lacks, rather than the first
// heartbeat, close or re-seed that needs it hours later.
func (s *Store) checkInputPermissions(ctx context.Context) error {
	base := strings.TrimSuffix(s.keys.Epoch, "epoch") + "permission-check:"
	refused, err := permissionsScript.Run(ctx, s.c.client, []string{base + "hash", base + "set", base + "zset"},
		toAnys(scriptCommands(inputScripts))...).StringSlice()
	if err != nil {
		return fmt.Errorf("checking the Redis user's permissions: %w", err)
	}
	conn, err := s.checkConnectionCommands(ctx)
	if err != nil {
		return err
	}
	refused = append(refused, conn...)
	if len(refused) > 0 {
		return &PermissionError{Command: strings.Join(refused, ", "), Reply: fmt.Errorf("checked at the start, on %s*", base)}
	}
	return nil
}

func toAnys(ss []string) []any {
	out := make([]any, len(ss))
	for i, v := range ss {
		out[i] = v
	}
	return out
}

// discoveryScripts are the scripts the group's stream discovery runs on its
// hash (discovery.go); ReadDiscovery reads it with HGETALL besides.
var discoveryScripts = []string{"discovery_claim", "discovery_publish", "discovery_renew", "discovery_forget", "discovery_fence"}

// CheckDiscoveryPermissions tries every command the group's stream
// discovery runs, on scratch keys beside the group's discovery hash (its
// hash tag {<group>}, not a stream's {<group>:<stream>}), so that an input
// whose `streams` has a pattern fails its connection when the Redis user
// may not reach that hash, naming the key pattern to add, rather than
// having every discovery round refused while nothing is read.
func (c *Checkpointer) CheckDiscoveryPermissions(ctx context.Context) error {
	base := c.cfg.KeyPrefix + ":{" + c.cfg.Group + "}:permission-check:"
	commands := scriptCommands(discoveryScripts)
	if !slices.Contains(commands, "HGETALL") {
		commands = append(commands, "HGETALL")
	}
	refused, err := permissionsScript.Run(ctx, c.client, []string{base + "hash", base + "set", base + "zset"}, toAnys(commands)...).StringSlice()
	if err != nil {
		var pe *PermissionError
		if errors.As(err, &pe) && pe.Key {
			return fmt.Errorf("checking the Redis user's permissions on the group's discovery hash %s (streams has a pattern): the user's key patterns do not cover it; add the key pattern ~%s to the user (%s): %w",
				c.DiscoveryKey(), discoveryKeyPattern(c.cfg.KeyPrefix, c.cfg.Group), aclDocs, err)
		}
		return fmt.Errorf("checking the Redis user's permissions on the group's discovery hash %s: %w", c.DiscoveryKey(), err)
	}
	if len(refused) > 0 {
		return &PermissionError{Command: strings.Join(refused, ", "), Reply: fmt.Errorf("checked at the start, for the group's stream discovery, on %s*", base)}
	}
	return nil
}

// discoveryKeyPattern is the ACL key pattern of a group's discovery hash,
// with the glob characters of the prefix and the group escaped.
func discoveryKeyPattern(prefix, group string) string {
	return aclGlobEscape(prefix) + ":{" + aclGlobEscape(group) + "}:*"
}

// aclGlobEscape escapes the characters a Redis ACL key pattern (a glob)
// treats specially.
func aclGlobEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
