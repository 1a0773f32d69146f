package integration_test

import (
	"errors"
	"net"
	"syscall"
	"testing"

	"github.com/distlock/distlock/integration"
)

func TestRefusedAddr(t *testing.T) {
	addr := integration.RefusedAddr(t)
	if _, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
	// The port is not handed to another listener while it is held.
	for range 200 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		got := l.Addr().String()
		l.Close()
		if got == addr {
			t.Fatalf("a new listener got %s, the refused address", addr)
		}
	}
	if _, err := net.Listen("tcp", addr); err == nil {
		t.Fatalf("listen on %s succeeded while the refused address holds it", addr)
	}
}
