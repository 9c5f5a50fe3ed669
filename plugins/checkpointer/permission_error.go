package checkpointer

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redpanda-data/benthos/v4/public/service"
)

// ErrNoPermission is matched with errors.Is when Redis refused a command or
// a key because the ACL user lacks the permission; the error is a
// *PermissionError naming what was refused.
var ErrNoPermission = errors.New("the Redis user lacks a permission")

// aclDocs is where the user finds the rules each role needs.
const aclDocs = `docs/deploy.md, "Redis ACL users" (config/deploy/redis-acl.conf)`

// PermissionError is a command or key Redis refused for the lack of an ACL
// permission, at the top level or inside one of the checkpointer's scripts.
type PermissionError struct {
	// Command is the refused command in upper case ("" when the reply
	// does not say).
	Command string
	// Key is true when the user may run the command but not on its keys.
	Key bool
	// Script is the file in lua/ that holds the refused call (the
	// script's own or prelude.lua) and Line its line there; "" and 0 for a
	// command sent directly.
	Script string
	Line   int
	// Reply is the server's error.
	Reply error
}

func (e *PermissionError) Error() string {
	what := "run " + e.Command
	if e.Key {
		what = "access the keys of " + e.Command
	}
	if e.Command == "" {
		what = "run one of its commands"
	}
	if e.Script != "" {
		what += fmt.Sprintf(" (lua/%s, line %d)", e.Script, e.Line)
	}
	return fmt.Sprintf("the Redis user may not %s: give it the rules in %s: %v", what, aclDocs, e.Reply)
}

// Is makes errors.Is(err, ErrNoPermission) true.
func (e *PermissionError) Is(target error) bool { return target == ErrNoPermission }

// Unwrap returns the server's reply.
func (e *PermissionError) Unwrap() error { return e.Reply }

// RedisError marks it a server reply, as go-redis' own errors are: the
// connection that carried it is fine.
func (e *PermissionError) RedisError() {}

// Replies of Redis 7.0 and 7.2+ to a refused command or key: at the top
// level "NOPERM ...", inside a script "ERR The user executing the script
// can't ..." (7.0) or "ERR ACL failure in script: ..." (7.2+), followed by
// "script: <sha1>, on @user_script:<line>.".
var (
	quotedCommand = regexp.MustCompile(`run the '([^']+)' command`)
	scriptAt      = regexp.MustCompile(`script: ([0-9a-f]{40}), on @user_script:(\d+)`)
)

// permissionError returns the PermissionError an error reply of cmd is, or
// nil when it is not a refusal for lack of permission.
func permissionError(cmd redis.Cmder, err error) *PermissionError {
	var re redis.Error
	var already *PermissionError
	if err == nil || !errors.As(err, &re) || errors.As(err, &already) {
		return nil
	}
	msg := re.Error()
	inScript := strings.Contains(msg, "The user executing the script can't") || strings.Contains(msg, "ACL failure in script")
	if !strings.HasPrefix(msg, "NOPERM") && !inScript {
		return nil
	}
	pe := &PermissionError{Command: strings.ToUpper(cmd.Name()), Reply: err}
	pe.Key = strings.Contains(msg, "access") && strings.Contains(msg, "key")
	if m := quotedCommand.FindStringSubmatch(msg); m != nil {
		pe.Command = strings.ToUpper(m[1])
	}
	if m := scriptAt.FindStringSubmatch(msg); inScript && m != nil {
		line, _ := strconv.Atoi(m[2])
		pe.Command = ""
		if name, src, ok := scriptBySHA(m[1]); ok {
			lines := strings.Split(src, "\n")
			if line >= 1 && line <= len(lines) {
				if c := calledCommands.FindStringSubmatch(lines[line-1]); c != nil {
					pe.Command = strings.ToUpper(c[1])
				}
			}
			pe.Script, pe.Line = sourceLine(name, line)
		}
	}
	return pe
}

// sourceLine maps a line of the source Redis runs (see newScript: a
// newline, the prelude, a newline, the body) to its file in lua/ and line.
func sourceLine(name string, line int) (string, int) {
	before := strings.Count("\n"+luaPrelude+"\n", "\n")
	if line > before {
		return name + ".lua", line - before
	}
	return "prelude.lua", line - 1
}

// scriptBySHA finds one of the checkpointer's scripts by its SHA1.
func scriptBySHA(sha string) (name, src string, ok bool) {
	for n, s := range scripts {
		if s.script.Hash() == sha {
			return n, s.src, true
		}
	}
	return "", "", false
}

// permissionHook turns every refusal for lack of permission into a
// PermissionError and logs it at ERROR (once a minute per refusal): the
// input retries a failed Redis call, and without this a missing permission
// would show as warnings that never end.
type permissionHook struct {
	log    *service.Logger
	mu     sync.Mutex
	logged map[string]time.Time
}

func newPermissionHook(log *service.Logger) *permissionHook {
	return &permissionHook{log: log, logged: map[string]time.Time{}}
}

func (h *permissionHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *permissionHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *permissionHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		pe := permissionError(cmd, err)
		if pe == nil {
			return err
		}
		cmd.SetErr(pe)
		if ctx.Value(optionalPermission{}) == nil {
			h.report(pe)
		}
		return pe
	}
}

// optionalPermission marks a context whose commands the Redis user may
// lack without harm (withOptionalPermission).
type optionalPermission struct{}

// withOptionalPermission returns ctx for a command whose refusal its caller
// handles (INFO server in Join): the refusal is still a PermissionError,
// but the hook does not log it at ERROR.
func withOptionalPermission(ctx context.Context) context.Context {
	return context.WithValue(ctx, optionalPermission{}, true)
}

func (h *permissionHook) report(pe *PermissionError) {
	if h.log == nil {
		return
	}
	key := pe.Error()
	h.mu.Lock()
	last, seen := h.logged[key]
	if seen && time.Since(last) < time.Minute {
		h.mu.Unlock()
		return
	}
	h.logged[key] = time.Now()
	h.mu.Unlock()
	h.log.With("command", pe.Command, "script", pe.Script).Errorf("Redis refused a command for lack of permission; checkpoints and leases cannot work until it is granted: %v", pe)
}
