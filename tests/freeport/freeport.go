// Package freeport picks loopback addresses for the server processes that tests start.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// given holds every port Port has returned in this process. A test often picks several ports
// before any of its processes listens on them (three hosts' history ports, say); without it, a
// port picked for a later host could be handed out again while still unbound.
var given struct {
	sync.Mutex
	ports map[int]bool
}

// Address returns a loopback address, 127.0.0.1:port, free when it returns, for a server
// process that a test starts (and may SIGKILL and restart on the same address); port is Port's.
func Address() (string, error) {
	port, err := Port()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", port), nil
}

// Port returns a loopback port, free when it returns and never returned before in this process.
//
// The port comes from below the kernel's ephemeral range (net.ipv4.ip_local_port_range), where
// neither a listener on port 0 nor the local end of an outgoing connection lands: a port taken
// from that range by listening on 0 and closing was free only until the next test of the run
// opened a connection, and a server process started on it then found it in use ("cannot
// listen on 127.0.0.1:46187: the address is in use").
func Port() (int, error) {
	low, high := fixedPortRange()
	given.Lock()
	defer given.Unlock()
	if given.ports == nil {
		given.ports = map[int]bool{}
	}
	for range 200 {
		port := low + rand.IntN(high-low)
		if given.ports[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // taken, by another test or another process
		}
		if err := l.Close(); err != nil {
			return 0, err
		}
		given.ports[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("freeport: no free port in [%d, %d) after 200 tries", low, high)
}

// fixedPortRange is the range Port picks from: the ports from 10,000 up to the start
// of the ephemeral range (32,768 by default on Linux).
func fixedPortRange() (low, high int) {
	low, high = 10000, 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return low, high
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return low, high
	}
	if start, err := strconv.Atoi(fields[0]); err == nil && start > low+1000 {
		high = start
	}
	return low, high
}
