package integration

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// RefusedAddr returns a loopback address ("127.0.0.1:PORT") at which every
// connection is refused, for tests of what a client does when nothing
// listens, until t ends. The port is held by a socket that is bound but
// never listens: the kernel answers connections to it with a reset, and
// hands the port to no other socket meanwhile — a port merely closed
// after a listen could be given to the next server a test starts, which
// then answers where the test expected a refusal.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatalf("integration: refused address: socket: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("integration: refused address: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("integration: refused address: getsockname: %v", err)
	}
	port := sa.(*syscall.SockaddrInet4).Port
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}
