package integration

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// serverListener returns a listener on a free loopback port for a server
// to bind once the listener is closed.
//
// The port is taken below the kernel's ephemeral range on purpose: a port
// from ":0" is an ephemeral one, and between the harness closing it and
// the server binding it, any process's outgoing connection may be given
// that same port (the symptom: a member's peer URL answered by some other
// server). Ports below the range are only ever handed out on request, so
// the window is left to other harness processes picking the same random
// port, which binding checks.
func serverListener() (net.Listener, error) {
	lo := ephemeralLow()
	base := 10000
	if lo-base < 1000 {
		base = 1024
	}
	var last error
	for range 100 {
		port := base + rand.IntN(lo-base)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			return l, nil
		}
		last = err
	}
	return nil, fmt.Errorf("integration: no free server port below %d: %w", lo, last)
}

// ephemeralLow returns the lowest port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if lo, err := strconv.Atoi(f[0]); err == nil && lo > 2048 {
				return lo
			}
		}
	}
	return 32768
}
