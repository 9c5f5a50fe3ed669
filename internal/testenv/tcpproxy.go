package testenv

import (
	"fmt"
	"io"
	"net"
	"sync"
)

// TCPProxy forwards TCP connections from a loopback port to a target and
// can cut every open connection at once: a network fault below TLS and
// HTTP/2, where a subscription breaks mid-stream.
type TCPProxy struct {
	Addr   string
	target string
	ln     net.Listener

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// StartTCPProxy listens on a free 127.0.0.1 port and forwards to target
// (host:port).
func StartTCPProxy(target string) (*TCPProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("starting a TCP proxy to %s: %w", target, err)
	}
	p := &TCPProxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *TCPProxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// pipe copies one direction; when either side ends, both are closed.
func (p *TCPProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// Cut closes every open connection; new ones are accepted as before. It
// reports how many connections it cut.
func (p *TCPProxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.conns) / 2
	for c := range p.conns {
		_ = c.Close()
	}
	return n
}

// Close stops accepting and cuts every connection.
func (p *TCPProxy) Close() {
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}
