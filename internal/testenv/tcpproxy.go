package testenv

import (
	"fmt"
	"net"
	"sync"
)

// TCPProxy forwards TCP connections from a loopback port to a target and
// can cut every open connection at once: a network fault below TLS and
// HTTP/2, where a subscription breaks mid-stream. It can also hold every
// byte in both directions for a while and deliver it late (Hold): a
// partition that heals, with nothing lost or reset.
type TCPProxy struct {
	Addr   string
	target string
	ln     net.Listener

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
	// held, when not nil, is closed when a hold ends.
	held chan struct{}
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

// pipe copies one direction; when either side ends, both are closed. What
// it reads during a hold is written when the hold ends, and it reads no
// more until then (the rest waits in the kernel's buffers).
func (p *TCPProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			held := p.held
			p.mu.Unlock()
			if held != nil {
				<-held
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
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

// Hold stops forwarding in both directions until Release: bytes sent
// meanwhile arrive late, after Release, in order. Connections stay open and
// new ones are accepted (and held too).
func (p *TCPProxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil {
		p.held = make(chan struct{})
	}
}

// Release ends a hold: what was held is delivered.
func (p *TCPProxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != nil {
		close(p.held)
		p.held = nil
	}
}

// Close stops accepting, ends a hold and cuts every connection.
func (p *TCPProxy) Close() {
	_ = p.ln.Close()
	p.Release()
	p.Cut()
	p.wg.Wait()
}
