package integration

import (
	"bufio"
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer sends back every byte it gets.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// TestProxyFaults drives each kind of fault through one proxy to an echo
// server; the client is not a known node, so the server's faults apply.
func TestProxyFaults(t *testing.T) {
	nw := newNetwork()
	p, err := newProxy(nw, "srv", echoServer(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lines := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	send := func(s string) {
		if _, err := io.WriteString(c, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(want string) {
		t.Helper()
		select {
		case got := <-lines:
			if got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %q", want)
		}
	}
	nothing := func(what string) {
		t.Helper()
		select {
		case got := <-lines:
			t.Fatalf("%s: %q arrived", what, got)
		case <-time.After(300 * time.Millisecond):
		}
	}

	send("plain")
	expect("plain")

	// Hold: nothing arrives while held, then everything, in order, on the
	// same connection.
	nw.Set("srv", Fault{Hold: true})
	send("held-1")
	send("held-2")
	nothing("while held")
	nw.Clear("srv")
	expect("held-1")
	expect("held-2")

	// Drop, inbound only: what is sent is lost for good; clearing lets new
	// bytes through.
	nw.Set("srv", Fault{Drop: true, Dir: Inbound})
	send("dropped")
	nothing("while dropped")
	nw.Clear("srv")
	send("after-drop")
	expect("after-drop")

	// Outbound hold: the server gets the bytes, its answer waits.
	nw.Set("srv", Fault{Hold: true, Dir: Outbound})
	send("answer-held")
	nothing("answer held")
	nw.Clear("srv")
	expect("answer-held")

	// Delay: the bytes come, not before the delay (a lower bound only).
	nw.Set("srv", Fault{Delay: 200 * time.Millisecond})
	start := time.Now()
	send("delayed")
	expect("delayed")
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("delayed bytes came after %v", d)
	}
	nw.Clear("srv")
}

// TestAdmitStopsWithContext checks that a held chunk is given up when the
// proxy closes.
func TestAdmitStopsWithContext(t *testing.T) {
	nw := newNetwork()
	nw.Set("a", Fault{Hold: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := nw.admit(ctx, "", "a"); done <- err }()
	cancel()
	if err := <-done; err == nil {
		t.Fatal("admit returned no error after its context ended")
	}
}
