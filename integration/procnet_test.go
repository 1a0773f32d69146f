package integration

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
)

// A table as the kernel writes it: an earlier connection from port 40000
// (0x9C40) lingers in TIME_WAIT with inode 0, listed before the live
// connection from the same port to another address; then an IPv4-mapped
// socket in the tcp6 format.
const procNetTCPSample = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1770 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0000000000000000 100 0 0 10 0
   1: 0100007F:9C40 0100007F:1388 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000
   2: 0100007F:9C40 0100007F:1770 01 00000000:00000000 00:00000000 00000000     0        0 12345 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:9C42 0100007F:1770 08 00000000:00000000 00:00000000 00000000     0        0 0 1 0000000000000000 20 4 30 10 -1
`

const procNetTCP6Sample = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0000000000000000FFFF00000100007F:9C41 0000000000000000FFFF00000100007F:1770 01 00000000:00000000 00:00000000 00000000     0        0 777 1 0000000000000000 20 4 30 10 -1
`

func TestScanTCPMatchesTheLiveConnectionExactly(t *testing.T) {
	ap := netip.MustParseAddrPort
	find := func(table string, local, remote netip.AddrPort) (uint64, bool) {
		s, ok := scanTCP(strings.NewReader(table), func(s tcpSocket) bool { return s.local == local && s.remote == remote })
		return s.inode, ok
	}
	// The live connection, not the TIME_WAIT line before it with the same
	// local port (which a lookup by port alone returned: inode 0, owned
	// by nobody, so a server's peer link looked like a client's).
	if ino, ok := find(procNetTCPSample, ap("127.0.0.1:40000"), ap("127.0.0.1:6000")); !ok || ino != 12345 {
		t.Fatalf("live connection: inode %d, %v; want 12345", ino, ok)
	}
	// Only a TIME_WAIT socket has these addresses: not found.
	if ino, ok := find(procNetTCPSample, ap("127.0.0.1:40000"), ap("127.0.0.1:5000")); ok {
		t.Fatalf("TIME_WAIT socket found as live (inode %d)", ino)
	}
	// An orphaned socket (closing, inode 0): not found.
	if ino, ok := find(procNetTCPSample, ap("127.0.0.1:40002"), ap("127.0.0.1:6000")); ok {
		t.Fatalf("orphaned socket found as live (inode %d)", ino)
	}
	// IPv4-mapped addresses in tcp6 match the IPv4 addresses Go reports.
	if ino, ok := find(procNetTCP6Sample, ap("127.0.0.1:40001"), ap("127.0.0.1:6000")); !ok || ino != 777 {
		t.Fatalf("tcp6 connection: inode %d, %v; want 777", ino, ok)
	}

	s, ok := parseTCPLine(strings.Split(procNetTCPSample, "\n")[2])
	if !ok || s.state != tcpTimeWait || s.inode != 0 || s.live() ||
		s.local != ap("127.0.0.1:40000") || s.remote != ap("127.0.0.1:5000") {
		t.Fatalf("TIME_WAIT line parsed as %+v, %v", s, ok)
	}
	for _, bad := range []string{"", "  sl local", "   0: 0100007F 0100007F:1770 01 0 0 0 0 0 12"} {
		if s, ok := parseTCPLine(bad); ok {
			t.Errorf("parseTCPLine(%q) = %+v, want failure", bad, s)
		}
	}
}

// TestIdentifyRealSockets attributes real loopback connections: to the
// registered process that opened them, and to no one when that process
// is not registered.
func TestIdentifyRealSockets(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	in := <-accepted
	defer in.Close()

	p := newProcs(nil)
	if node, _, found := p.identify(in.RemoteAddr(), in.LocalAddr()); !found || node != "" {
		t.Fatalf("unregistered owner: %q, %v; want a client", node, found)
	}
	p.set("self", os.Getpid())
	if node, _, found := p.identify(in.RemoteAddr(), in.LocalAddr()); !found || node != "self" {
		t.Fatalf("registered owner: %q, %v; want self", node, found)
	}
	// The same port towards another address is another socket: none.
	other := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	p.retries = nil
	if node, _, found := p.identify(in.RemoteAddr(), other); found {
		t.Fatalf("a socket with other addresses attributed to %q", node)
	}

	// A connection its opener has closed already (as ZooKeeper does with
	// the election connections it drops) has nothing to attribute, and is
	// no cause for a warning: the proxy's end has seen the close.
	var logged bytes.Buffer
	p.log = slog.New(slog.NewTextHandler(&logged, nil))
	c.Close()
	buf := make([]byte, 1)
	if _, err := in.Read(buf); err == nil {
		t.Fatal("the closed connection delivered a byte")
	}
	if node, _, found := p.identify(in.RemoteAddr(), in.LocalAddr()); found {
		t.Fatalf("a closed connection attributed to %q", node)
	}
	if logged.Len() > 0 {
		t.Fatalf("warned about a closed connection: %s", logged.String())
	}
}

// TestCheckAttributionPutsRight audits a connection treated as a client's
// that a server opened: made before the harness knew the server's PID, it
// is attributed now, silently; taken for a client's because the lookup
// found another socket (as the lookup by local port found a TIME_WAIT
// one), it is attributed now and reported. Either way a cut of that
// server holds it from then on.
func TestCheckAttributionPutsRight(t *testing.T) {
	for _, tc := range []struct {
		name     string
		identify func(*procs) func(peer, self net.Addr) (string, uint64, bool)
		wantErr  bool
	}{
		{"registered late", func(p *procs) func(peer, self net.Addr) (string, uint64, bool) { return p.identify }, false},
		{"wrong socket", func(*procs) func(peer, self net.Addr) (string, uint64, bool) {
			return func(net.Addr, net.Addr) (string, uint64, bool) { return "", 0, true }
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster{cfg: newConfig(nil), net: newNetwork(), procs: newProcs(nil)}
			px, err := newProxy(c.net, "srv", echoServer(t), tc.identify(c.procs))
			if err != nil {
				t.Fatal(err)
			}
			defer px.Close()
			c.proxies = append(c.proxies, px)
			conn, err := net.Dial("tcp", px.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			lines := make(chan string, 4)
			go func() {
				sc := bufio.NewScanner(conn)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			echo := func(s string) {
				t.Helper()
				if _, err := io.WriteString(conn, s+"\n"); err != nil {
					t.Fatal(err)
				}
			}
			echo("a")
			if got := <-lines; got != "a" {
				t.Fatalf("echo %q", got)
			}
			// This process plays the server that opened the connection.
			c.procs.set("me", os.Getpid())
			err = c.CheckAttribution()
			if (err != nil) != tc.wantErr {
				t.Fatalf("CheckAttribution: %v, want an error: %v", err, tc.wantErr)
			}
			if err := c.CheckAttribution(); err != nil {
				t.Fatalf("second audit: %v", err)
			}
			c.net.Set("me", Fault{Hold: true})
			echo("b")
			select {
			case got := <-lines:
				t.Fatalf("%q passed a cut of the server that opened the connection", got)
			case <-time.After(300 * time.Millisecond):
			}
			c.net.Clear("me")
			select {
			case got := <-lines:
				if got != "b" {
					t.Fatalf("after the heal: %q", got)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("held bytes not delivered after the heal")
			}
		})
	}
}
