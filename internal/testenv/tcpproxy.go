package testenv

import (
	"fmt"
	"net"
	"sync"
	"time"
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
	// gentle: connections to the target end with a FIN, never a reset
	// (StartGentleTCPProxy); upstream holds those connections.
	gentle   bool
	upstream map[net.Conn]bool
	// closed: Close has begun, so a connection accepted before it and
	// dialled after its Cut is closed, not piped (Close would wait on its
	// pipes forever: a replica's link to its master never goes idle).
	closed bool
	// dial reaches the target (net.Dial; a test holds it).
	dial func(network, addr string) (net.Conn, error)
}

// gentleDrain bounds how long a gentle proxy reads from the target after
// its FIN, waiting for the target to close its side too.
const gentleDrain = 10 * time.Second

// StartTCPProxy listens on a free 127.0.0.1 port and forwards to target
// (host:port).
func StartTCPProxy(target string) (*TCPProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("starting a TCP proxy to %s: %w", target, err)
	}
	p := &TCPProxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}, upstream: map[net.Conn]bool{}, dial: net.Dial}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// StartGentleTCPProxy is StartTCPProxy whose connections to the target
// never end with a reset. When a client goes (SIGKILLed, or cut by Cut),
// the proxy sends the target a FIN and reads, discarding, what the target
// still sends until it closes its side too (at most 10 s): what a load
// balancer between a client and Kinesis does. The client sees its cut
// connection reset as ever. kinesis-mock frees a subscription whose
// connection closed normally at once, but holds one that was reset for its
// whole five-minute session (SubscriptionHeldAtMost); behind this proxy a
// cut or a killed subscriber costs seconds, not minutes, so a test can
// check how fast readers come back.
func StartGentleTCPProxy(target string) (*TCPProxy, error) {
	p, err := StartTCPProxy(target)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.gentle = true
	p.mu.Unlock()
	return p, nil
}

func (p *TCPProxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		out, err := p.dial("tcp", target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = in.Close()
			_ = out.Close()
			continue
		}
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.upstream[out] = true
		// Added under mu, so Close's Cut either closes this pair or
		// finds closed set first: its Wait never misses the pipes.
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// pipe copies one direction; when either side ends, both are closed. What
// it reads during a hold is written when the hold ends, and it reads no
// more until then (the rest waits in the kernel's buffers). A gentle proxy
// ends a connection to the target with a FIN instead (endGently).
func (p *TCPProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	p.mu.Lock()
	gentle, fromTarget := p.gentle, p.upstream[src]
	p.mu.Unlock()
	buf := make([]byte, 32<<10)
	draining := false
	for {
		n, err := src.Read(buf)
		if n > 0 && !draining {
			p.mu.Lock()
			held := p.held
			p.mu.Unlock()
			if held != nil {
				<-held
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				if gentle && fromTarget {
					// The client is gone: read the target to its end.
					p.endGently(src)
					draining = true
					continue
				}
				break
			}
		}
		if err != nil {
			break
		}
	}
	if gentle && !fromTarget {
		// The client ended: the other direction reads the target until
		// it closes, then closes both.
		p.endGently(dst)
		_ = src.Close()
		return
	}
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	delete(p.upstream, dst)
	delete(p.upstream, src)
	p.mu.Unlock()
}

// endGently sends the target a FIN on up and gives it gentleDrain to close
// its side; the direction that reads up then closes it.
func (p *TCPProxy) endGently(up net.Conn) {
	if tc, ok := up.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	_ = up.SetReadDeadline(time.Now().Add(gentleDrain))
}

// Cut closes every open connection; new ones are accepted as before. It
// reports how many connections it cut.
func (p *TCPProxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for c := range p.conns {
		if !p.upstream[c] {
			n++
		}
		if p.gentle && p.upstream[c] {
			p.endGently(c)
			continue
		}
		_ = c.Close()
	}
	return n
}

// Retarget sends the connections accepted from now on to target
// (host:port); the open ones stay where they are, for Cut to end. A
// promoted replica takes its master's address so.
func (p *TCPProxy) Retarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
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
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.ln.Close()
	p.Release()
	p.Cut()
	p.wg.Wait()
}
