package freeport

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAddressIsFreeAndBelowTheEphemeralRange(t *testing.T) {
	t.Parallel()
	low, high := fixedPortRange()
	for range 20 {
		addr, err := Address()
		require.NoError(t, err)
		_, p, err := net.SplitHostPort(addr)
		require.NoError(t, err)
		port, err := strconv.Atoi(p)
		require.NoError(t, err)
		require.GreaterOrEqual(t, port, low)
		require.Less(t, port, high, "a port of the ephemeral range can be taken by any outgoing connection")
		l, err := net.Listen("tcp", addr)
		require.NoError(t, err, "the address was not free")
		require.NoError(t, l.Close())
	}
}

func TestPortIsNeverHandedOutTwice(t *testing.T) {
	t.Parallel()
	seen := map[int]bool{}
	for range 500 {
		port, err := Port()
		require.NoError(t, err)
		require.False(t, seen[port], "port %d handed out twice while the first holder may not listen yet", port)
		seen[port] = true
	}
}
