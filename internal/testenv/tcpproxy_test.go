package testenv

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTCPProxyHoldDeliversLate: during a hold nothing reaches the other
// side, the connection stays open, and at the release what was sent
// arrives, in order.
func TestTCPProxyHoldDeliversLate(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	p, err := StartTCPProxy(ln.Addr().String())
	require.NoError(t, err)
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr)
	require.NoError(t, err)
	defer c.Close()
	buf := make([]byte, 16)

	_, err = c.Write([]byte("one"))
	require.NoError(t, err)
	_, err = io.ReadFull(c, buf[:3])
	require.NoError(t, err)
	assert.Equal(t, "one", string(buf[:3]))

	p.Hold()
	_, err = c.Write([]byte("two"))
	require.NoError(t, err)
	_, err = c.Write([]byte("three"))
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(300*time.Millisecond)))
	_, err = c.Read(buf)
	assert.True(t, errors.Is(err, os.ErrDeadlineExceeded), "nothing arrives during the hold: %v", err)

	p.Release()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = io.ReadFull(c, buf[:8])
	require.NoError(t, err)
	assert.Equal(t, "twothree", string(buf[:8]), "what was held arrives after the release, in order")
}

// A gentle proxy never resets the target's connection: when the client is
// cut, the target reads a FIN and may still write (the proxy reads and
// drops it) until it closes its side. The plain proxy resets it: a target
// that goes on writing after the cut gets ECONNRESET or EPIPE, which is
// what makes kinesis-mock hold a subscription for five minutes.
func TestGentleTCPProxyNeverResetsTheTarget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		start  func(string) (*TCPProxy, error)
		resets bool
	}{
		{"plain", StartTCPProxy, true},
		{"gentle", StartGentleTCPProxy, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			defer ln.Close()
			// The target writes every 5 ms, like a subscription pushing
			// events; once it reads the end of the connection it writes
			// 200 ms more, then closes, and reports its first write error.
			ended := make(chan error, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					ended <- err
					return
				}
				defer c.Close()
				eof := make(chan struct{})
				go func() { _, _ = io.Copy(io.Discard, c); close(eof) }()
				var after <-chan time.Time
				for {
					if _, err := c.Write(make([]byte, 1024)); err != nil {
						ended <- err
						return
					}
					select {
					case <-eof:
						eof, after = nil, time.After(200*time.Millisecond)
					case <-after:
						ended <- nil
						return
					case <-time.After(5 * time.Millisecond):
					}
				}
			}()
			p, err := tc.start(ln.Addr().String())
			require.NoError(t, err)
			defer p.Close()
			c, err := net.Dial("tcp", p.Addr)
			require.NoError(t, err)
			defer c.Close()
			_, err = io.ReadFull(c, make([]byte, 4096))
			require.NoError(t, err, "the target's bytes come through")
			assert.Equal(t, 1, p.Cut(), "one client connection cut")
			select {
			case err := <-ended:
				if tc.resets {
					assert.Error(t, err, "the target's writes after the cut fail")
				} else {
					assert.NoError(t, err, "the target wrote on after the FIN and closed its side itself")
				}
			case <-time.After(15 * time.Second):
				t.Fatal("the target never saw its connection end")
			}
		})
	}
}

// TestTCPProxyRetargetSendsNewConnectionsToTheNewTarget guards the
// failover soak's front: after Retarget a new connection reaches the new
// target (the promoted replica), while the open one stays on the old
// until Cut.
func TestTCPProxyRetargetSendsNewConnectionsToTheNewTarget(t *testing.T) {
	greeter := func(name string) net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = c.Write([]byte(name))
				go func() { _, _ = io.Copy(io.Discard, c); _ = c.Close() }()
			}
		}()
		return ln
	}
	oldT, newT := greeter("old"), greeter("new")
	defer oldT.Close()
	defer newT.Close()
	p, err := StartTCPProxy(oldT.Addr().String())
	require.NoError(t, err)
	defer p.Close()
	greeting := func(c net.Conn) string {
		buf := make([]byte, 3)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		_, err := io.ReadFull(c, buf)
		require.NoError(t, err)
		return string(buf)
	}
	before, err := net.Dial("tcp", p.Addr)
	require.NoError(t, err)
	defer before.Close()
	assert.Equal(t, "old", greeting(before))

	p.Retarget(newT.Addr().String())
	after, err := net.Dial("tcp", p.Addr)
	require.NoError(t, err)
	defer after.Close()
	assert.Equal(t, "new", greeting(after), "a connection after Retarget reaches the new target")
	assert.Equal(t, 2, p.Cut(), "the open connections stay until Cut")
}

// TestTCPProxyCloseEndsAConnectionDialledDuringIt guards Close hanging for
// good: a connection accepted just before Close and dialled to the target
// after Close's Cut was piped anyway, and Close waited on its pipes, which
// a chatty pair never ends (CI, 2026-12-07: a soak's replication link
// proxy, between a replica and its master, held the chaos package until
// its 45-minute timeout).
func TestTCPProxyCloseEndsAConnectionDialledDuringIt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	// The target talks every 10 ms, as a master and its replica ping.
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for {
					if _, err := c.Write([]byte("ping")); err != nil {
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
		}
	}()
	p, err := StartTCPProxy(ln.Addr().String())
	require.NoError(t, err)
	dialing, closing := make(chan struct{}), make(chan struct{})
	p.mu.Lock()
	p.dial = func(network, addr string) (net.Conn, error) {
		close(dialing)
		<-closing // the dial completes once Close has cut what was open
		return net.Dial(network, addr)
	}
	p.mu.Unlock()
	c, err := net.Dial("tcp", p.Addr)
	require.NoError(t, err)
	defer c.Close()
	go func() { _, _ = io.Copy(io.Discard, c) }()
	<-dialing
	closed := make(chan struct{})
	go func() { p.Close(); close(closed) }()
	// Let Close reach its Wait, then the dial finish.
	for {
		p.mu.Lock()
		done := p.closed
		p.mu.Unlock()
		if done {
			break
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	close(closing)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waits 10 s after a connection accepted before it was dialled: its pipes were started after Close's cut")
	}
}
