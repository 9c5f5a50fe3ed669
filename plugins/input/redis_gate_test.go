package input

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// redisGate forwards TCP connections to a Redis server and can be shut:
// then it refuses new connections and drops the open ones. Instances
// behind it cannot reach a Redis that others reach directly, which lets a
// test decide who sees a store that came back empty first.
type redisGate struct {
	ln     net.Listener
	target string
	shut   atomic.Bool
	mu     sync.Mutex
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

// newRedisGate listens on a free loopback port in front of target
// (host:port) until the test ends.
func newRedisGate(t *testing.T, target string) *redisGate {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := &redisGate{ln: ln, target: target, conns: map[net.Conn]bool{}}
	g.wg.Add(1)
	go g.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		g.Shut()
		g.wg.Wait()
	})
	return g
}

// Addr is the gate's host:port.
func (g *redisGate) Addr() string { return g.ln.Addr().String() }

// Shut refuses new connections and closes the open ones.
func (g *redisGate) Shut() {
	g.shut.Store(true)
	g.mu.Lock()
	defer g.mu.Unlock()
	for c := range g.conns {
		_ = c.Close()
	}
}

// Open forwards new connections again.
func (g *redisGate) Open() { g.shut.Store(false) }

func (g *redisGate) serve() {
	defer g.wg.Done()
	for {
		in, err := g.ln.Accept()
		if err != nil {
			return
		}
		if g.shut.Load() {
			_ = in.Close()
			continue
		}
		out, err := net.Dial("tcp", g.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		g.mu.Lock()
		g.conns[in], g.conns[out] = true, true
		g.mu.Unlock()
		g.wg.Add(2)
		go g.pipe(in, out)
		go g.pipe(out, in)
	}
}

// pipe copies one direction and, when it ends, closes both sides.
func (g *redisGate) pipe(dst, src net.Conn) {
	defer g.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	g.mu.Lock()
	delete(g.conns, dst)
	delete(g.conns, src)
	g.mu.Unlock()
}
