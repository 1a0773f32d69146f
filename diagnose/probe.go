package diagnose

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// connKind is an endpoint's verdict, finer than the sentinels.
type connKind int

const (
	connNone        connKind = iota // no verdict: looks like the store, or cannot tell
	connUnknownHost                 // the name does not resolve
	connDNS                         // the lookup failed otherwise
	connRefused                     // nothing listens there
	connNoRoute                     // host or network unreachable
	connNoTCP                       // the TCP connect was not answered in time
	connSilent                      // connected, but nothing answers
	connTLSRequired                 // a plain client, a TLS server
	connTLSOffered                  // a TLS client, a server without TLS
	connNotStore                    // something else answers
	connBadEndpoint                 // not an address the client dials
)

var kindErr = map[connKind]error{
	connUnknownHost: ErrUnknownHost,
	connDNS:         ErrDNS,
	connRefused:     ErrRefused,
	connNoRoute:     ErrNoRoute,
	connNoTCP:       ErrTimeout,
	connSilent:      ErrTimeout,
	connTLSRequired: ErrTLSRequired,
	connTLSOffered:  ErrTLSOffered,
	connNotStore:    ErrNotStore,
	connBadEndpoint: ErrBadEndpoint,
}

// bannerWait is how long a probe listens, before it greets the server,
// for a server that speaks first (SSH, SMTP, ...: not etcd, not
// ZooKeeper).
const bannerWait = 150 * time.Millisecond

// prober probes endpoints of one store.
type prober struct {
	store Store
	tls   bool // an etcd client's TLS on endpoints without a scheme
}

// verdict is what the probe of one endpoint found.
type verdict struct {
	ep        string // as given
	addr      string // host:port
	tls       bool   // the client would use TLS
	kind      connKind
	connected bool
	detail    string // what was seen, for the message
}

func (v verdict) endpoint() Endpoint {
	e := Endpoint{Endpoint: v.ep, Addr: v.addr, TLS: v.tls, Err: kindErr[v.kind], Connected: v.connected, Detail: v.detail}
	if v.kind == connSilent && e.Detail == "" {
		e.Detail = "the connection was accepted, but nothing answered"
	}
	return e
}

// probe finds endpoint ep's verdict, by deadline at the latest.
func (s prober) probe(ctx context.Context, ep string, deadline time.Time) verdict {
	v := verdict{ep: ep}
	var ok bool
	if v.addr, v.tls, ok = s.address(ep); !ok {
		return v // a unix socket or the like: no verdict
	}
	if _, _, err := net.SplitHostPort(v.addr); err != nil {
		port := map[Store]string{EtcdStore: "2379", ZooKeeperStore: "2181"}[s.store]
		v.kind, v.detail = connBadEndpoint, fmt.Sprintf("no port in %q (%s's client port is usually %s: write %s)", ep, s.store, port, strings.TrimSuffix(ep, "/")+":"+port)
		v.addr = ""
		return v
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	conn, v := dialProbe(ctx, v)
	if conn == nil {
		return v
	}
	v.connected = true
	defer conn.Close()
	conn.SetDeadline(deadline)
	if b := readSome(conn, time.Now().Add(bannerWait)); len(b) > 0 {
		v.kind, v.detail = connNotStore, fmt.Sprintf("it spoke first, sending %s before the client said anything (%s never does): another kind of service", quoteBytes(b), s.store)
		return v
	}
	switch {
	case s.store == EtcdStore && v.tls:
		return s.probeEtcdTLS(ctx, conn, v, deadline)
	case s.store == EtcdStore:
		return s.probeEtcdPlain(ctx, conn, v, deadline)
	}
	return s.probeZK(ctx, conn, v, deadline)
}

// address returns ep's address and whether the client uses TLS there;
// !ok for an endpoint the probes cannot dial (a unix socket).
func (s prober) address(ep string) (addr string, useTLS, ok bool) {
	addr, useTLS = ep, s.tls
	if s.store == ZooKeeperStore {
		if _, _, err := net.SplitHostPort(ep); err != nil && !strings.Contains(ep, ":") {
			addr = net.JoinHostPort(ep, "2181") // go-zookeeper's default
		}
		return addr, false, true
	}
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil || u.Host == "" {
			return "", false, false
		}
		switch u.Scheme {
		case "http":
			addr, useTLS = u.Host, false
		case "https":
			addr, useTLS = u.Host, true
		default:
			return "", false, false
		}
	}
	return addr, useTLS, true
}

// dialProbe resolves v.addr's host and opens a TCP connection to it; on
// failure it returns a nil conn and the verdict.
func dialProbe(ctx context.Context, v verdict) (net.Conn, verdict) {
	host, port, _ := net.SplitHostPort(v.addr)
	if net.ParseIP(host) == nil {
		// RFC 6761: names under .invalid never resolve; say so without
		// asking DNS.
		if h := strings.ToLower(strings.TrimSuffix(host, ".")); h == "invalid" || strings.HasSuffix(h, ".invalid") {
			v.kind, v.detail = connUnknownHost, fmt.Sprintf("unknown host %q (.invalid names never resolve)", host)
			return nil, v
		}
		ips, err := net.DefaultResolver.LookupHost(ctx, host)
		var dnsErr *net.DNSError
		switch {
		case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
			v.kind, v.detail = connUnknownHost, fmt.Sprintf("unknown host %q (DNS: no such host)", host)
			return nil, v
		case ctx.Err() != nil:
			v.kind, v.detail = connNoTCP, fmt.Sprintf("the DNS lookup of %q did not finish in time", host)
			return nil, v
		case err != nil:
			v.kind, v.detail = connDNS, fmt.Sprintf("the DNS lookup of %q failed (%v)", host, err)
			return nil, v
		case len(ips) == 0:
			v.kind, v.detail = connUnknownHost, fmt.Sprintf("unknown host %q (DNS: no address)", host)
			return nil, v
		}
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, port))
	switch {
	case err == nil:
		return conn, v
	case errors.Is(err, syscall.ECONNREFUSED):
		v.kind, v.detail = connRefused, "connection refused"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		v.kind, v.detail = connNoRoute, fmt.Sprintf("no route to the host (%v)", unwrapOp(err))
	case ctx.Err() != nil || isTimeout(err):
		v.kind, v.detail = connNoTCP, "no answer to the TCP connect: the host is down, or a firewall drops the packets"
	default:
		v.kind, v.detail = connNoRoute, fmt.Sprintf("cannot connect (%v)", unwrapOp(err))
	}
	return nil, v
}

// h2Preface is what an HTTP/2 client (etcd's gRPC) says first: the
// connection preface and an empty SETTINGS frame.
var h2Preface = append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 4, 0, 0, 0, 0, 0)

// answer is how a server answered a greeting.
type answer int

const (
	ansSilent answer = iota // nothing by the deadline
	ansClosed               // closed (or reset) without a byte
	ansH2                   // an HTTP/2 frame: an h2c (gRPC) server
	ansHTTP1                // an HTTP/1 response
	ansTLS                  // a TLS record (an alert): a TLS server
	ansZK                   // a ZooKeeper four-letter-word answer
	ansOther                // something else
)

// greet sends hello on conn and sorts out the answer. If more is given,
// it is sent too when nothing came back within a second: for servers
// that read more than hello before they decide.
func greet(conn net.Conn, hello []byte, deadline time.Time, more ...byte) (answer, []byte) {
	conn.SetDeadline(deadline)
	if _, err := conn.Write(hello); err != nil {
		if isTimeout(err) {
			return ansSilent, nil
		}
		return ansClosed, nil
	}
	var b []byte
	if len(more) > 0 {
		soon := time.Now().Add(time.Second)
		if deadline.Before(soon) {
			soon = deadline
		}
		if b = readSome(conn, soon); b == nil {
			if !time.Now().Before(deadline) {
				return ansSilent, nil
			}
			if _, err := conn.Write(more); err != nil {
				if isTimeout(err) {
					return ansSilent, nil
				}
				return ansClosed, nil
			}
		}
	}
	if b == nil {
		b = readSome(conn, deadline)
	}
	return sortAnswer(b), b
}

// sortAnswer says what an answer (see readSome) is.
func sortAnswer(b []byte) answer {
	switch {
	case b == nil:
		return ansSilent
	case len(b) == 0:
		return ansClosed
	case len(b) >= 9 && b[3] == 0x4 && bytes.Equal(b[5:9], []byte{0, 0, 0, 0}): // a SETTINGS frame
		return ansH2
	case bytes.HasPrefix(b, []byte("HTTP/")), isHTML(b):
		return ansHTTP1
	case len(b) >= 3 && b[0] >= 0x14 && b[0] <= 0x17 && b[1] == 3: // a TLS record
		return ansTLS
	case bytes.HasPrefix(b, []byte("Zookeeper version")) || bytes.Contains(b, []byte("not in the whitelist")) || bytes.Contains(b, []byte("not executed")):
		return ansZK
	}
	return ansOther
}

// readSome reads what the server sends until deadline: nil when it sent
// nothing and the connection is still open, empty when it closed it
// without a byte, else the bytes (up to 512, as many as came together).
func readSome(conn net.Conn, deadline time.Time) []byte {
	conn.SetReadDeadline(deadline)
	buf := make([]byte, 512)
	n, err := io.ReadAtLeast(conn, buf, 1)
	if n > 0 {
		// Give the rest of a short answer a moment to arrive.
		conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		m, _ := io.ReadFull(conn, buf[n:])
		return buf[:n+m]
	}
	if isTimeout(err) {
		return nil
	}
	return []byte{}
}

// isHTML reports whether b is an HTML page (an HTTP/0.9-style answer:
// some servers send an error page without a status line).
func isHTML(b []byte) bool {
	b = bytes.ToLower(bytes.TrimSpace(b))
	return bytes.HasPrefix(b, []byte("<!doctype html")) || bytes.HasPrefix(b, []byte("<html"))
}

// tlsAnswer is what a TLS handshake with the endpoint found.
type tlsAnswer int

const (
	tlsSilent tlsAnswer = iota // no answer by the deadline
	tlsNo                      // not a TLS server: it closed, or sent something else
	tlsH2                      // a TLS server that speaks HTTP/2 (gRPC)
	tlsOther                   // a TLS server without HTTP/2 (or it refused us: an alert)
)

// handshake tries TLS on a fresh connection to addr (not verifying the
// server: this only asks whether it speaks TLS) and reports the ALPN
// protocol it agreed to.
func handshake(ctx context.Context, addr string, deadline time.Time) (tlsAnswer, string) {
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return tlsNo, ""
	}
	defer raw.Close()
	raw.SetDeadline(deadline)
	host, _, _ := net.SplitHostPort(addr)
	conn := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, ServerName: host, NextProtos: []string{"h2"}})
	err = conn.HandshakeContext(ctx)
	switch {
	case err == nil && conn.ConnectionState().NegotiatedProtocol == "h2":
		return tlsH2, "h2"
	case err == nil:
		return tlsOther, conn.ConnectionState().NegotiatedProtocol
	case strings.Contains(err.Error(), "remote error: tls:"):
		return tlsOther, "" // an alert: a TLS server, refusing us
	case isTimeout(err) || ctx.Err() != nil:
		return tlsSilent, ""
	}
	return tlsNo, ""
}

func (s prober) probeEtcdPlain(ctx context.Context, conn net.Conn, v verdict, deadline time.Time) verdict {
	ans, b := greet(conn, h2Preface, deadline)
	switch ans {
	case ansH2:
		return v // gRPC's HTTP/2 without TLS: etcd, most likely
	case ansSilent:
		v.kind = connSilent
		return v
	case ansHTTP1:
		v.kind, v.detail = connNotStore, fmt.Sprintf("an HTTP/1 server answered (%s), not etcd's gRPC", firstLine(b))
		return v
	case ansTLS:
		v.kind, v.detail = connTLSRequired, "the server answered with a TLS alert: it wants TLS"
		return v
	case ansZK, ansOther:
		v.kind, v.detail = connNotStore, fmt.Sprintf("it answered HTTP/2's greeting with %s, which is not HTTP/2", quoteBytes(b))
		return v
	}
	// Closed without a word: a TLS server does that to a plain greeting.
	switch t, proto := handshake(ctx, v.addr, deadline); t {
	case tlsH2:
		v.kind, v.detail = connTLSRequired, "the server speaks TLS (with HTTP/2, as etcd does), not plain HTTP/2"
	case tlsOther:
		v.kind, v.detail = connNotStore, fmt.Sprintf("a TLS server that does not speak HTTP/2 (ALPN %q), so not etcd: an HTTPS server or proxy?", proto)
	default:
		v.kind, v.detail = connNotStore, "it closed the connection on HTTP/2's greeting without answering, and does not speak TLS either"
	}
	return v
}

func (s prober) probeEtcdTLS(ctx context.Context, conn net.Conn, v verdict, deadline time.Time) verdict {
	conn.Close() // the banner check's; the handshake opens its own
	switch t, proto := handshake(ctx, v.addr, deadline); t {
	case tlsH2:
		return v // whether it takes our certificates is the client's to find out
	case tlsOther:
		if proto == "" {
			return v // it refused us with an alert: the client says why
		}
		v.kind, v.detail = connNotStore, fmt.Sprintf("a TLS server that does not speak HTTP/2 (ALPN %q), so not etcd: an HTTPS server or proxy?", proto)
		return v
	case tlsSilent:
		v.kind = connSilent
		return v
	}
	// Not TLS: what then?
	var d net.Dialer
	plain, err := d.DialContext(ctx, "tcp", v.addr)
	if err != nil {
		v.kind, v.detail = connNotStore, "it closed the connection on the TLS handshake"
		return v
	}
	defer plain.Close()
	switch ans, b := greet(plain, h2Preface, deadline); ans {
	case ansH2:
		v.kind, v.detail = connTLSOffered, "it speaks HTTP/2 without TLS (etcd without TLS), and the client offered TLS"
	case ansHTTP1:
		v.kind, v.detail = connNotStore, fmt.Sprintf("it does not speak TLS, and an HTTP/1 server answered plain HTTP/2 (%s), not etcd's gRPC", firstLine(b))
	case ansSilent:
		v.kind = connSilent
	case ansClosed:
		v.kind, v.detail = connNotStore, "it closed the connection on the TLS handshake and on HTTP/2's greeting"
	default:
		v.kind, v.detail = connNotStore, fmt.Sprintf("it does not speak TLS, and answered HTTP/2's greeting with %s", quoteBytes(b))
	}
	return v
}

func (s prober) probeZK(ctx context.Context, conn net.Conn, v verdict, deadline time.Time) verdict {
	// srvr is the one four-letter word ZooKeeper answers by default; with
	// four-letter words off it still answers that it is not allowed.
	// ZooKeeper gets those four bytes only (it closes the connection
	// once it has answered: more would turn its close into a reset);
	// servers that want more before they decide get blank lines after a
	// second: an HTTP server (a request line), etcd's port (which reads
	// 24 bytes for HTTP/2's preface).
	ans, b := greet(conn, []byte("srvr"), deadline, []byte(strings.Repeat("\r\n", 16))...)
	switch ans {
	case ansZK:
		return v
	case ansSilent:
		v.kind = connSilent
		return v
	case ansHTTP1:
		v.kind, v.detail = connNotStore, fmt.Sprintf("an HTTP server answered (%s), not ZooKeeper (etcd's client port?)", firstLine(b))
		return v
	case ansTLS:
		v.kind, v.detail = connTLSRequired, "the server answered with a TLS alert: it wants TLS (ZooKeeper's secureClientPort?)"
		return v
	case ansH2, ansOther:
		v.kind, v.detail = connNotStore, fmt.Sprintf("it answered ZooKeeper's srvr with %s", quoteBytes(b))
		return v
	}
	switch t, _ := handshake(ctx, v.addr, deadline); t {
	case tlsH2, tlsOther:
		v.kind, v.detail = connTLSRequired, "the server speaks TLS (ZooKeeper's secureClientPort?)"
	default:
		v.kind, v.detail = connNotStore, "it closed the connection on ZooKeeper's srvr without answering, and does not speak TLS either"
	}
	return v
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// unwrapOp is err without net.OpError's "dial tcp ADDR:" prefix.
func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}

// firstLine is the first line of b, quoted.
func firstLine(b []byte) string {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	return fmt.Sprintf("%q", strings.TrimSpace(string(line)))
}

// quoteBytes quotes up to 32 bytes of b.
func quoteBytes(b []byte) string {
	if len(b) > 32 {
		return fmt.Sprintf("%q...", b[:32])
	}
	return fmt.Sprintf("%q", b)
}
