package chaos

import (
	"net"
	"sync"
)

// tcpProxy forwards every connection it accepts to upstream, and can break the path the way
// networks do:
//
//   - freeze: every connection stays open and nothing moves either way (a process stopped with
//     SIGSTOP, a switch dropping packets without resets); thaw lets the bytes flow again;
//   - refuse: every connection is closed and new ones are refused (the proxy killed); restore
//     listens again on the same port.
type tcpProxy struct {
	upstream string
	addr     string

	mu       sync.Mutex
	listener net.Listener
	conns    map[net.Conn]struct{}
	// gate is closed while bytes may move; freeze replaces it with an open one.
	gate chan struct{}
}

// newTCPProxy listens on a free loopback port and forwards to upstream.
func newTCPProxy(upstream string) (*tcpProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	open := make(chan struct{})
	close(open)
	p := &tcpProxy{upstream: upstream, addr: l.Addr().String(), listener: l, conns: map[net.Conn]struct{}{}, gate: open}
	go p.accept(l)
	return p, nil
}

// Addr is where clients connect.
func (p *tcpProxy) Addr() string { return p.addr }

func (p *tcpProxy) accept(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *tcpProxy) serve(down net.Conn) {
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		_ = down.Close()
		return
	}
	p.mu.Lock()
	if p.listener == nil { // refused meanwhile
		p.mu.Unlock()
		_ = down.Close()
		_ = up.Close()
		return
	}
	p.conns[down], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(up, down) }()
	go func() { defer wg.Done(); p.pipe(down, up) }()
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, down)
	delete(p.conns, up)
	p.mu.Unlock()
}

// pipe copies src to dst, waiting at the gate before each write, and closes both at the end.
func (p *tcpProxy) pipe(dst, src net.Conn) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.gate
			p.mu.Unlock()
			<-gate
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// freeze stops every byte in both directions; connections stay open.
func (p *tcpProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default:
	}
}

// thaw lets the bytes held by freeze go.
func (p *tcpProxy) thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// refuse closes every connection and the listener: new connections are refused.
func (p *tcpProxy) refuse() {
	p.mu.Lock()
	l := p.listener
	p.listener = nil
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	if l != nil {
		_ = l.Close()
	}
	for c := range conns {
		_ = c.Close()
	}
}

// restore listens again on the proxy's port.
func (p *tcpProxy) restore() error {
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.listener = l
	p.mu.Unlock()
	go p.accept(l)
	return nil
}

// close ends the proxy.
func (p *tcpProxy) close() {
	p.thaw()
	p.refuse()
}
