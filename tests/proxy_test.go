package tests

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// tcpProxy forwards connections to a server and can cut them (RST on both sides) or hold their
// traffic, as a network between a worker and the server would.
type tcpProxy struct {
	t        *testing.T
	target   string
	listener net.Listener

	mu      sync.Mutex
	conns   map[net.Conn]net.Conn // client side → server side
	paused  bool
	resume  chan struct{}
	accepts []time.Time
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &tcpProxy{t: t, target: target, listener: l, conns: make(map[net.Conn]net.Conn), resume: make(chan struct{})}
	t.Cleanup(func() {
		_ = l.Close()
		p.Reset()
	})
	go p.accept()
	return p
}

// Address is what clients dial instead of the server.
func (p *tcpProxy) Address() string { return p.listener.Addr().String() }

func (p *tcpProxy) accept() {
	for {
		client, err := p.listener.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		server, err := net.Dial("tcp", target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		p.conns[client] = server
		p.accepts = append(p.accepts, time.Now())
		p.mu.Unlock()
		go p.pipe(client, server)
		go p.pipe(server, client)
	}
}

func (p *tcpProxy) pipe(from, to net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			p.waitWhilePaused()
			if _, werr := to.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			if err != io.EOF {
				_ = to.Close()
			}
			break
		}
	}
	_ = from.Close()
	_ = to.Close()
}

func (p *tcpProxy) waitWhilePaused() {
	p.mu.Lock()
	paused, resume := p.paused, p.resume
	p.mu.Unlock()
	if paused {
		<-resume
	}
}

// Reset cuts every connection open through the proxy with an RST on both sides, as a
// middlebox dropping its state would.
func (p *tcpProxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for client, server := range p.conns {
		for _, c := range []net.Conn{client, server} {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
		}
		delete(p.conns, client)
	}
}

// SetTarget sends the connections made from now on to another server (a load balancer moving
// its clients to another host).
func (p *tcpProxy) SetTarget(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
}

// Pause holds all traffic (both ways, on every connection) until Resume.
func (p *tcpProxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		p.paused, p.resume = true, make(chan struct{})
	}
}

// Resume lets held traffic through.
func (p *tcpProxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		p.paused = false
		close(p.resume)
	}
}

// AcceptsSince returns when connections were accepted after t.
func (p *tcpProxy) AcceptsSince(t time.Time) []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []time.Time
	for _, a := range p.accepts {
		if a.After(t) {
			out = append(out, a)
		}
	}
	return out
}
