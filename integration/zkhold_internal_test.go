package integration

import (
	"net"
	"testing"
	"time"
)

// TestHoldStopsTheReadInProgress holds a connection while the client's
// Read waits in the socket: hold's channel closes once that Read is out
// of the socket, and from then on what the server sends is delivered only
// on release.
func TestHoldStopsTheReadInProgress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	entered := make(chan struct{}, 1)
	c := &zkCaptureConn{Conn: cc, parsed: true, closed: make(chan struct{}), holdChanged: make(chan struct{}),
		entered: func() {
			select {
			case entered <- struct{}{}:
			default:
			}
		}}
	defer c.Close()
	got := make(chan string, 10)
	go func() {
		defer close(got)
		buf := make([]byte, 64)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				got <- string(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	inSocket := func() bool {
		c.hmu.Lock()
		defer c.hmu.Unlock()
		return c.reading
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the reader never reached the socket")
	}
	select {
	case <-c.hold():
	case <-time.After(10 * time.Second):
		t.Fatal("the Read in the socket did not stop on hold")
	}
	if inSocket() {
		t.Fatal("hold reported the Read stopped while it is still in the socket")
	}
	if _, err := sc.Write([]byte("reply")); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-got:
		t.Fatalf("%q delivered while held", b)
	case <-time.After(300 * time.Millisecond):
	}
	c.release()
	select {
	case b := <-got:
		if b != "reply" {
			t.Fatalf("delivered %q after release, want %q", b, "reply")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held reply was not delivered on release")
	}
}
