package testenv

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisOptions shape a redis-server.
type RedisOptions struct {
	// AppendOnly turns on the AOF with fsync always, so a restart keeps
	// every acknowledged write.
	AppendOnly bool
	// Password sets requirepass (user "default").
	Password string
	// ACLUser and ACLPassword add an ACL user allowed all keys and commands,
	// and switch off the default user.
	ACLUser, ACLPassword string
	// ShippedACL loads the project's ACL file (config/deploy/redis-acl.conf)
	// with test passwords (ACLPassword); URLAs connects as one of its users.
	ShippedACL bool
	// TLS serves TLS only, with certificates generated for the test.
	TLS bool
	// Args are passed to redis-server as they are.
	Args []string
	// Server is the server program to run: a path or a name looked up in
	// PATH ("" for redis-server). Redis72 finds one of 7.2 or later.
	Server string
}

// server is the program these options run.
func (o RedisOptions) server() string {
	if o.Server != "" {
		return o.Server
	}
	return "redis-server"
}

// Redis is a running redis-server.
type Redis struct {
	Port int
	// Addr is host:port.
	Addr string
	// Dir holds the server's data files and, with TLS, its certificates.
	Dir  string
	Opts RedisOptions
	// Certs is set with TLS.
	Certs *Certs

	proc *Process
}

// StartRedis starts redis-server on a free port.
func StartRedis(ctx context.Context, opts RedisOptions) (*Redis, error) {
	return retryStart(func() (*Redis, error) { return startRedis(ctx, opts) })
}

func startRedis(ctx context.Context, opts RedisOptions) (*Redis, error) {
	if _, err := lookPath(opts.server()); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "connect-kinesis-redis-")
	if err != nil {
		return nil, err
	}
	r := &Redis{Port: port, Addr: fmt.Sprintf("127.0.0.1:%d", port), Dir: dir, Opts: opts}
	if opts.TLS {
		if r.Certs, err = GenerateCerts(dir); err != nil {
			return nil, err
		}
	}
	if err := r.Start(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return r, nil
}

// Start (re)starts the server on its port and data folder.
func (r *Redis) Start(ctx context.Context) error {
	var args []string
	if r.Opts.ShippedACL {
		// The file holds redis.conf lines, so it is the server's
		// configuration file: the first argument.
		conf, err := r.writeShippedACL()
		if err != nil {
			return err
		}
		args = append(args, conf)
	}
	args = append(args, "--bind", "127.0.0.1", "--dir", r.Dir, "--save", "", "--protected-mode", "no")
	if r.Opts.TLS {
		args = append(args, "--port", "0", "--tls-port", itoa(r.Port),
			"--tls-cert-file", r.Certs.ServerCert, "--tls-key-file", r.Certs.ServerKey,
			"--tls-ca-cert-file", r.Certs.CA, "--tls-auth-clients", "optional")
	} else {
		args = append(args, "--port", itoa(r.Port))
	}
	if r.Opts.AppendOnly {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	if r.Opts.Password != "" {
		args = append(args, "--requirepass", r.Opts.Password)
	}
	if r.Opts.ACLUser != "" {
		aclFile := filepath.Join(r.Dir, "users.acl")
		acl := fmt.Sprintf("user default off\nuser %s on >%s ~* &* +@all\n", r.Opts.ACLUser, r.Opts.ACLPassword)
		if err := os.WriteFile(aclFile, []byte(acl), 0o600); err != nil {
			return err
		}
		args = append(args, "--aclfile", aclFile)
	}
	args = append(args, r.Opts.Args...)
	p, err := startProcess("redis-server", nil, r.Dir, r.Opts.server(), args...)
	if err != nil {
		return err
	}
	r.proc = p
	return waitReady(ctx, p, 15*time.Second, func(ctx context.Context) error {
		c, err := r.newClient()
		if err != nil {
			return err
		}
		defer c.Close()
		return c.Ping(ctx).Err()
	})
}

func (r *Redis) newClient() (*redis.Client, error) {
	o, err := redis.ParseURL(r.URL())
	if err != nil {
		return nil, err
	}
	if o.TLSConfig != nil {
		o.TLSConfig, err = r.Certs.ClientTLS()
		if err != nil {
			return nil, err
		}
	}
	o.MaxRetries = -1
	o.DialTimeout = time.Second
	return redis.NewClient(o), nil
}

// URL is a redis:// (or rediss:// with TLS) URL with the credentials set.
func (r *Redis) URL() string {
	u := url.URL{Scheme: "redis", Host: r.Addr}
	if r.Opts.TLS {
		u.Scheme = "rediss"
	}
	switch {
	case r.Opts.ACLUser != "":
		u.User = url.UserPassword(r.Opts.ACLUser, r.Opts.ACLPassword)
	case r.Opts.Password != "":
		u.User = url.UserPassword("", r.Opts.Password)
	}
	return u.String()
}

// Client returns a go-redis client for tests to look at the data with.
func (r *Redis) Client() *redis.Client {
	c, err := r.newClient()
	if err != nil {
		panic(err) // the URL is built by this package
	}
	return c
}

// Process is the running server process.
func (r *Redis) Process() *Process { return r.proc }

// Stop ends the server (SIGTERM, then SIGKILL after 5s).
func (r *Redis) Stop() {
	if r.proc != nil {
		r.proc.Stop(5 * time.Second)
	}
}

// Kill ends the server with SIGKILL.
func (r *Redis) Kill() {
	if r.proc != nil {
		r.proc.Kill()
	}
}

// Restart stops and starts the server on the same port and data folder.
func (r *Redis) Restart(ctx context.Context) error {
	r.Stop()
	return r.Start(ctx)
}

// Pause freezes the server (SIGSTOP): connections stay open, nothing answers.
func (r *Redis) Pause() error { return r.proc.Signal(syscall.SIGSTOP) }

// Resume undoes Pause.
func (r *Redis) Resume() error { return r.proc.Signal(syscall.SIGCONT) }

// Close stops the server and removes its folder.
func (r *Redis) Close() {
	r.Stop()
	_ = os.RemoveAll(r.Dir)
}

// NewRedis starts a redis-server for a test and stops it when the test ends.
func NewRedis(tb testing.TB, opts ...RedisOptions) *Redis {
	tb.Helper()
	var o RedisOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	r, err := StartRedis(tb.Context(), o)
	Require(tb, "starting redis-server", err)
	tb.Cleanup(r.Close)
	return r
}

// RedisCluster is a local Redis Cluster of three masters.
type RedisCluster struct {
	Nodes []*Redis
}

// Addrs lists the nodes' host:port.
func (c *RedisCluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// URL is a redis:// URL naming every node with `addr` parameters, as
// go-redis ParseClusterURL reads it.
func (c *RedisCluster) URL() string {
	u := url.URL{Scheme: "redis", Host: c.Nodes[0].Addr}
	q := url.Values{}
	for _, n := range c.Nodes[1:] {
		q.Add("addr", n.Addr)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Client returns a cluster client.
func (c *RedisCluster) Client() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
}

// Close stops every node.
func (c *RedisCluster) Close() {
	for _, n := range c.Nodes {
		n.Close()
	}
}

// StartRedisCluster starts three cluster-enabled servers and joins them with
// `redis-cli --cluster create`, then waits until every node says the
// cluster is ok. opts shape every node (ShippedACL, say); cluster mode is
// added to their Args.
func StartRedisCluster(ctx context.Context, opts ...RedisOptions) (*RedisCluster, error) {
	var o RedisOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	if _, err := lookPath("redis-cli"); err != nil {
		return nil, err
	}
	c := &RedisCluster{}
	for i := 0; i < 3; i++ {
		no := o
		no.Args = append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000"}, o.Args...)
		n, err := StartRedis(ctx, no)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := runRedisCLI(ctx, args...)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("creating the cluster: %w: %s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, n := range c.Nodes {
		cl := n.Client()
		for {
			info, err := cl.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				cl.Close()
				c.Close()
				return nil, fmt.Errorf("cluster not ok after 20s: %v %s", err, info)
			}
			time.Sleep(100 * time.Millisecond)
		}
		cl.Close()
	}
	return c, nil
}

// NewRedisCluster starts a cluster for a test and stops it when it ends.
func NewRedisCluster(tb testing.TB, opts ...RedisOptions) *RedisCluster {
	tb.Helper()
	c, err := StartRedisCluster(tb.Context(), opts...)
	Require(tb, "starting a Redis Cluster", err)
	tb.Cleanup(c.Close)
	return c
}

// ClientTLS is a client TLS config trusting the generated CA.
func (c *Certs) ClientTLS() (*tls.Config, error) {
	pem, err := os.ReadFile(c.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// runRedisCLI runs redis-cli to its end, started like every other child
// (it dies with the test binary), and returns what it printed.
func runRedisCLI(ctx context.Context, args ...string) ([]byte, error) {
	var out bytes.Buffer
	cli := exec.CommandContext(ctx, "redis-cli", args...)
	cli.Stdout, cli.Stderr = &out, &out
	err := StartCommand("redis-cli", cli)
	if err == nil {
		err = cli.Wait()
	}
	return out.Bytes(), err
}
