package testenv

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The users of the ACL file the project ships for operators,
// config/deploy/redis-acl.conf. Tests start a Redis with exactly that file
// (ShippedACL) and run each role as its user, so that a command the code
// needs and the file lacks fails a test.
const (
	// ACLInput is the `kinesis` input's user.
	ACLInput = "connect-kinesis-input"
	// ACLViewer is the read-only user of `checkpoints show` and `export`.
	ACLViewer = "connect-kinesis-viewer"
	// ACLAdmin is the user of `checkpoints reset`, `import` and `delete`.
	ACLAdmin = "connect-kinesis-admin"
)

// shippedACLFile is the operators' ACL file, from the repository root.
const shippedACLFile = "config/deploy/redis-acl.conf"

// ACLPassword is the password a test server started with ShippedACL gives
// user, in place of the file's REPLACE_WITH_<ROLE>_PASSWORD placeholder.
func ACLPassword(user string) string { return "test-pw-" + user }

// shippedACLConfig returns the shipped ACL file with the test passwords in
// place of its placeholders. Every placeholder must be one of the known
// users', so a user added to the file without a test fails here.
func shippedACLConfig() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(root, shippedACLFile))
	if err != nil {
		return "", fmt.Errorf("reading the shipped ACL file: %w", err)
	}
	text := string(b)
	for _, user := range []string{ACLInput, ACLViewer, ACLAdmin} {
		role := strings.ToUpper(strings.TrimPrefix(user, "connect-kinesis-"))
		placeholder := "REPLACE_WITH_" + role + "_PASSWORD"
		if !strings.Contains(text, "user "+user+" on >"+placeholder+" ") {
			return "", fmt.Errorf("%s: no line `user %s on >%s ...`", shippedACLFile, user, placeholder)
		}
		text = strings.ReplaceAll(text, placeholder, ACLPassword(user))
	}
	if strings.Contains(text, ">REPLACE_WITH_") {
		return "", fmt.Errorf("%s: a password placeholder of an unknown user is left", shippedACLFile)
	}
	return text, nil
}

// writeShippedACL writes the shipped ACL file, passwords filled in, into
// the server's folder and returns its path, for redis-server to read as its
// configuration file. The default user stays as Redis makes it (all
// commands, no password): Client uses it to look at the data.
func (r *Redis) writeShippedACL() (string, error) {
	text, err := shippedACLConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(r.Dir, "redis-acl.conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// URLAs is URL with user's credentials: one of the shipped ACL users, with
// the password ACLPassword gives it.
func (r *Redis) URLAs(user string) string {
	u, err := url.Parse(r.URL())
	if err != nil {
		panic(err) // URL is built by this package
	}
	u.User = url.UserPassword(user, ACLPassword(user))
	return u.String()
}

// URLAs is URL with user's credentials (see Redis.URLAs).
func (c *RedisCluster) URLAs(user string) string {
	u, err := url.Parse(c.URL())
	if err != nil {
		panic(err) // URL is built by this package
	}
	u.User = url.UserPassword(user, ACLPassword(user))
	return u.String()
}

// ACLDenials lists what the server's ACL LOG holds: each command or key it
// refused, as "<user>: <reason> <object> (<context>)". A test that runs a
// role under its shipped user expects none, also for refusals the client
// ignored (go-redis' own handshake commands, for one).
func (r *Redis) ACLDenials(ctx context.Context) ([]string, error) {
	c := r.Client()
	defer c.Close()
	return ACLDenials(ctx, c)
}

// ACLDenials reads the ACL LOG of the server c talks to; see Redis.ACLDenials.
func ACLDenials(ctx context.Context, c redis.Cmdable) ([]string, error) {
	entries, err := c.ACLLog(ctx, 100).Result()
	if err != nil {
		return nil, fmt.Errorf("reading ACL LOG: %w", err)
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, fmt.Sprintf("%s: %s %s (%s)", e.Username, e.Reason, e.Object, e.Context))
	}
	return out, nil
}
