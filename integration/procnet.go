package integration

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// procs names the harness's server processes by PID, so a proxy can tell
// which server a loopback connection comes from: the connecting socket is
// a socket of this machine, and Linux lists its inode in /proc/net/tcp and
// the owning process's fds in /proc/PID/fd. That attributes every
// server-to-server connection whatever the protocol (etcd's peer HTTP,
// ZooKeeper's quorum and election channels), without giving each pair of
// servers its own address.
//
// The lookup must match the connection exactly. A local port alone names
// no socket: the kernel gives one ephemeral port to many connections with
// different remote ends, and a port's earlier connections linger in
// TIME_WAIT (inode 0, owned by nobody) for a minute. Taking the first
// line with the port made a busy machine's peer links look like clients'
// links, which a cut does not hold: the "cut" cut nothing. So a socket is
// found by both of its addresses, and only a live one (with an inode)
// counts.
type procs struct {
	log     *slog.Logger
	retries []time.Duration // identifyRetries, or none in tests

	mu   sync.Mutex
	pids map[int]string
}

func newProcs(log *slog.Logger) *procs {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &procs{log: log, retries: identifyRetries[:], pids: map[int]string{}}
}

func (p *procs) set(node string, pid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, v := range p.pids {
		if v == node {
			delete(p.pids, k)
		}
	}
	if pid > 0 {
		p.pids[pid] = node
	}
}

func (p *procs) snapshot() map[int]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	pids := make(map[int]string, len(p.pids))
	for k, v := range p.pids {
		pids[k] = v
	}
	return pids
}

// identifyRetries are the pauses between lookups of a connecting socket
// that is not listed yet. A connection a proxy has accepted was
// established by the connecting side first, so its socket is normally
// listed at once; the retries cover a slow /proc on a loaded machine.
var identifyRetries = [...]time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}

// identify returns the node whose process owns the socket that opened a
// connection a proxy accepted: peer is the accepted connection's remote
// address (the connecting socket's local one) and self its local address
// (the connecting socket's remote one). It returns "" for a socket no
// server owns (a client), and found=false when no live socket with both
// addresses is listed even after retries: the connection cannot be
// attributed. inode is the connecting socket's.
//
// An unattributable connection while servers are running is suspicious —
// it may be a server's peer link that a cut would then not hold — so,
// unless its opener has closed it already, it is logged as a warning. It
// is treated as a client's, and every Cut audits the connections treated
// as clients' again (CheckAttribution), puts right any that turns out to
// be a server's, and fails if the lookup had matched another socket.
func (p *procs) identify(peer, self net.Addr) (node string, inode uint64, found bool) {
	local, ok1 := addrPort(peer)
	remote, ok2 := addrPort(self)
	if !ok1 || !ok2 {
		return "", 0, false
	}
	sock, found := findSocket(local, remote)
	for _, d := range p.retries {
		if found {
			break
		}
		time.Sleep(d)
		sock, found = findSocket(local, remote)
	}
	pids := p.snapshot()
	if !found {
		// ZooKeeper opens election connections it closes at once (the
		// server with the smaller id drops its own), and any client may
		// hang up before the proxy looks: then the proxy's own end has
		// seen the close (CLOSE_WAIT) or is gone, and there is nothing to
		// attribute. An end still ESTABLISHED whose other end cannot be
		// found is what must not happen.
		if own, ok := findSocket(remote, local); ok && own.state == tcpEstablished && len(pids) > 0 {
			p.log.Warn("integration: cannot attribute a proxied connection: no live socket "+
				local.String()+"->"+remote.String()+" in /proc/net/tcp{,6}; treating it as a client's",
				"servers", len(pids))
		}
		return "", 0, false
	}
	return ownerOf(pids, map[uint64]bool{sock.inode: true})[sock.inode], sock.inode, true
}

// ownerOf finds, among the processes in pids, the owners of the sockets
// with the given inodes: the result maps an inode to its owner's node.
func ownerOf(pids map[int]string, inodes map[uint64]bool) map[uint64]string {
	out := map[uint64]string{}
	for pid, node := range pids {
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
		for _, fd := range fds {
			l, err := os.Readlink(fd)
			if err != nil {
				continue
			}
			s, ok := strings.CutPrefix(l, "socket:[")
			if !ok {
				continue
			}
			ino, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64)
			if err == nil && inodes[ino] {
				out[ino] = node
			}
		}
	}
	return out
}

// addrPort converts a TCP address, IPv4-mapped IPv6 addresses unmapped.
func addrPort(a net.Addr) (netip.AddrPort, bool) {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}, false
	}
	ap := ta.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), ap.IsValid()
}

// procNetTCP are the kernel's tables of TCP sockets.
var procNetTCP = []string{"/proc/net/tcp", "/proc/net/tcp6"}

// findSocket returns the live socket whose local address is local and
// whose remote address is remote.
func findSocket(local, remote netip.AddrPort) (tcpSocket, bool) {
	for _, file := range procNetTCP {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		s, ok := scanTCP(f, func(s tcpSocket) bool { return s.local == local && s.remote == remote })
		f.Close()
		if ok {
			return s, true
		}
	}
	return tcpSocket{}, false
}

// liveSockets returns every live socket of the kernel's tables, by its
// pair of addresses, for audits that look many up at once.
func liveSockets() map[[2]netip.AddrPort]uint64 {
	out := map[[2]netip.AddrPort]uint64{}
	for _, file := range procNetTCP {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		scanTCP(f, func(s tcpSocket) bool {
			out[[2]netip.AddrPort{s.local, s.remote}] = s.inode
			return false
		})
		f.Close()
	}
	return out
}

// tcpSocket is one line of /proc/net/tcp or /proc/net/tcp6.
type tcpSocket struct {
	local, remote netip.AddrPort
	state         uint8 // 1 ESTABLISHED ... 6 TIME_WAIT ... 10 LISTEN
	inode         uint64
}

// The kernel's TCP states that matter here.
const (
	tcpEstablished = 1
	tcpTimeWait    = 6
)

// live reports whether a process can own the socket: a socket in
// TIME_WAIT (or orphaned, closing) has no file and inode 0.
func (s tcpSocket) live() bool { return s.inode != 0 && s.state != tcpTimeWait }

// scanTCP reads a /proc/net/tcp table and returns the first live socket
// for which match returns true.
func scanTCP(r io.Reader, match func(tcpSocket) bool) (tcpSocket, bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	sc.Scan() // header
	for sc.Scan() {
		s, ok := parseTCPLine(sc.Text())
		if ok && s.live() && match(s) {
			return s, true
		}
	}
	return tcpSocket{}, false
}

// parseTCPLine decodes one line of /proc/net/tcp{,6}:
//
//	sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
func parseTCPLine(line string) (tcpSocket, bool) {
	f := strings.Fields(line)
	if len(f) < 10 {
		return tcpSocket{}, false
	}
	local, ok1 := parseProcAddr(f[1])
	remote, ok2 := parseProcAddr(f[2])
	st, err1 := strconv.ParseUint(f[3], 16, 8)
	inode, err2 := strconv.ParseUint(f[9], 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil {
		return tcpSocket{}, false
	}
	return tcpSocket{local: local, remote: remote, state: uint8(st), inode: inode}, true
}

// parseProcAddr decodes an address of /proc/net/tcp{,6}, "IP:PORT" in
// hex, IPv4-mapped IPv6 addresses unmapped.
func parseProcAddr(s string) (netip.AddrPort, bool) {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	ip := parseProcIP(h)
	if ip == nil {
		return netip.AddrPort{}, false
	}
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(a.Unmap(), uint16(port)), true
}

// parseProcIP decodes /proc/net/tcp's hex addresses: 32-bit words in host
// (little-endian) byte order.
func parseProcIP(h string) net.IP {
	if len(h) != 8 && len(h) != 32 {
		return nil
	}
	b := make([]byte, len(h)/2)
	for i := range b {
		v, err := strconv.ParseUint(h[2*i:2*i+2], 16, 8)
		if err != nil {
			return nil
		}
		b[i] = byte(v)
	}
	for i := 0; i+4 <= len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	return net.IP(b)
}
