package checkpointer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeNode is a TCP server that reads RESP commands and answers each one
// but the connection's handshake with reply: an error line ("-MOVED ..."),
// "close" to cut the connection, or "silent" to answer nothing.
func fakeNode(t *testing.T, reply string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveFake(c, reply)
		}
	}()
	return ln.Addr().String()
}

func serveFake(c net.Conn, reply string) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		var out string
		switch name := strings.ToUpper(args[0]); {
		case name == "HELLO":
			out = "-ERR unknown command 'HELLO'\r\n"
		case name == "CLIENT":
			out = "+OK\r\n"
		case reply == "close":
			return
		case reply == "silent":
			_, _ = io.Copy(io.Discard, r)
			return
		default:
			out = reply + "\r\n"
		}
		if _, err := c.Write([]byte(out)); err != nil {
			return
		}
	}
}

func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("not an array: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return nil, err
	}
	args := make([]string, 0, n)
	for range n {
		if _, err := r.ReadString('\n'); err != nil { // $len
			return nil, err
		}
		arg, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		args = append(args, strings.TrimSuffix(arg, "\r\n"))
	}
	return args, nil
}

// TestClusterReloadClassifiesGoRedisRealErrors guards the reload hook
// against go-redis's own error values, not look-alikes: the answers of a
// live node (MOVED and ASK, which go-redis follows and reloads on itself;
// LOADING, TRYAGAIN and READONLY, which it retries, reloading on
// READONLY; a script's error; NOPERM) ask for no reload, and no answer (a
// cut connection, a read timeout, a refused dial) asks for one. A
// CLUSTERDOWN answer asks for one too: a master cut off from the rest of
// its cluster answers CLUSTERDOWN for the slots its promoted replica now
// serves, so it never answers MOVED and never fails to answer, and the
// client would keep asking it until its periodic reload (60 s), past any
// lease.
func TestClusterReloadClassifiesGoRedisRealErrors(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := closed.Addr().String()
	require.NoError(t, closed.Close())
	for _, tc := range []struct {
		name   string
		addr   string
		reload bool
	}{
		{"MOVED", fakeNode(t, "-MOVED 3999 127.0.0.1:6381"), false},
		{"ASK", fakeNode(t, "-ASK 3999 127.0.0.1:6381"), false},
		{"LOADING", fakeNode(t, "-LOADING Redis is loading the dataset in memory"), false},
		{"TRYAGAIN", fakeNode(t, "-TRYAGAIN Multiple keys request during rehashing of slot"), false},
		{"READONLY", fakeNode(t, "-READONLY You can't write against a read only replica."), false},
		{"a script's error", fakeNode(t, "-ERR fenced script: user_script:1"), false},
		{"NOPERM", fakeNode(t, "-NOPERM User u has no permissions to run the 'evalsha' command"), false},
		{"CLUSTERDOWN", fakeNode(t, "-CLUSTERDOWN The cluster is down"), true},
		{"CLUSTERDOWN, slot not served", fakeNode(t, "-CLUSTERDOWN Hash slot not served"), true},
		{"a cut connection", fakeNode(t, "close"), true},
		{"a read timeout", fakeNode(t, "silent"), true},
		{"a refused dial", refused, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			c := redis.NewClient(&redis.Options{Addr: tc.addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1,
				DialTimeout: time.Second, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
			defer c.Close()
			c.AddHook(clusterReloadHook{reload: func(context.Context) { n.Add(1) }})
			err := c.Get(t.Context(), "k").Err()
			require.Error(t, err)
			want := int32(0)
			if tc.reload {
				want = 1
			}
			assert.Equal(t, want, n.Load(), "reloads asked for after %T %v", err, err)
		})
	}
}

// TestClusterReloadAfterAPoolTimeoutOrTheCallersDeadline pins the two
// failures without an answer that go-redis reports as its own or the
// caller's: every connection to the node taken by calls it does not answer
// (redis: connection pool timeout), and the caller's deadline passing
// while the node is silent. Both ask for a reload; a cancel does not.
func TestClusterReloadAfterAPoolTimeoutOrTheCallersDeadline(t *testing.T) {
	addr := fakeNode(t, "silent")
	var n atomic.Int32
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1, PoolSize: 1,
		PoolTimeout: 50 * time.Millisecond, ReadTimeout: 2 * time.Second, ContextTimeoutEnabled: true})
	defer c.Close()
	c.AddHook(clusterReloadHook{reload: func(context.Context) { n.Add(1) }})

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	held := make(chan error, 1)
	go func() { held <- c.Get(ctx, "k").Err() }()
	time.Sleep(100 * time.Millisecond)
	err := c.Get(t.Context(), "k").Err()
	assert.ErrorIs(t, err, redis.ErrPoolTimeout)
	// go-redis sets the caller's deadline on the connection, so the call
	// fails as a read timeout.
	var timeout net.Error
	heldErr := <-held
	assert.True(t, errors.As(heldErr, &timeout) && timeout.Timeout(), "%T %v", heldErr, heldErr)
	assert.Equal(t, int32(2), n.Load(), "a pool timeout and the caller's deadline each ask for a reload")
}
