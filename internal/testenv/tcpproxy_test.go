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
