package integration

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// procs names the harness's server processes by PID, so a proxy can tell
// which server a loopback connection comes from: the connecting socket is
// a socket of this machine, and Linux lists its inode in /proc/net/tcp and
// the owning process's fds in /proc/PID/fd. That attributes every
// server-to-server connection whatever the protocol (etcd's peer HTTP,
// ZooKeeper's quorum and election channels), without giving each pair of
// servers its own address.
type procs struct {
	mu   sync.Mutex
	pids map[int]string
}

func newProcs() *procs { return &procs{pids: map[int]string{}} }

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

// identify returns the node whose process owns the local socket at addr,
// or "" when none does (a client, or a socket already gone).
func (p *procs) identify(addr net.Addr) string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return ""
	}
	inode := socketInode(ta)
	if inode == "" {
		return ""
	}
	p.mu.Lock()
	pids := make(map[int]string, len(p.pids))
	for k, v := range p.pids {
		pids[k] = v
	}
	p.mu.Unlock()
	target := "socket:[" + inode + "]"
	for pid, node := range pids {
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
		for _, fd := range fds {
			if l, err := os.Readlink(fd); err == nil && l == target {
				return node
			}
		}
	}
	return ""
}

// socketInode finds the inode of the TCP socket whose local address is a.
func socketInode(a *net.TCPAddr) string {
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if inode := scanTCP(file, a); inode != "" {
			return inode
		}
	}
	return ""
}

func scanTCP(file string, a *net.TCPAddr) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", a.Port)
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || !strings.HasSuffix(fields[1], want) {
			continue
		}
		if ip := parseProcIP(strings.TrimSuffix(fields[1], want)); ip != nil && ip.Equal(a.IP) {
			return fields[9]
		}
	}
	return ""
}

// parseProcIP decodes /proc/net/tcp's hex addresses: 32-bit words in host
// (little-endian) byte order.
func parseProcIP(h string) net.IP {
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
