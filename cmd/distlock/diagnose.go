package main

// Why a cluster could not be reached, told apart. The clients (etcd's
// gRPC, go-zookeeper) retry every failure until --dial-timeout and then
// say "context deadline exceeded", whatever the failure was. So while
// they dial, distlock looks at each endpoint itself, the way a person
// would with nc and openssl: resolve the host, open a TCP connection, see
// whether the server speaks first (etcd and ZooKeeper never do), then
// greet it as the client would (HTTP/2's preface for etcd, the srvr
// four-letter word for ZooKeeper) and, when the answer is not the
// store's, try TLS on a fresh connection. Each endpoint gets a verdict:
//
//	unknown host, DNS failure, connection refused, no route   (fast)
//	TLS required (a plain client, a TLS server)               (fast)
//	TLS offered to a server without TLS                       (fast)
//	not etcd / not ZooKeeper (HTTP/1, another service, ...)   (fast)
//	no answer (TCP connect, or the server stays silent)       (at the timeout)
//	looks like the store                                      (no verdict)
//
// When every endpoint has a fast verdict, distlock reports at once; else
// the client's dial goes on, and if it fails the verdicts explain it. The
// probes start only when the dial has not succeeded within probeDelay, so
// a healthy cluster never sees them.

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

// The verdicts' sentinel errors, for errors.Is on a *connError.
var (
	errUnknownHost = errors.New("unknown host")
	errDNS         = errors.New("DNS lookup failed")
	errRefused     = errors.New("connection refused")
	errNoRoute     = errors.New("no route to host")
	errNoAnswer    = errors.New("no answer")
	errTLSRequired = errors.New("the server requires TLS")
	errTLSOffered  = errors.New("TLS offered to a server without TLS")
	errNotStore    = errors.New("not etcd or ZooKeeper")
)

// connKind is an endpoint's verdict.
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
)

var kindErr = map[connKind]error{
	connUnknownHost: errUnknownHost,
	connDNS:         errDNS,
	connRefused:     errRefused,
	connNoRoute:     errNoRoute,
	connNoTCP:       errNoAnswer,
	connSilent:      errNoAnswer,
	connTLSRequired: errTLSRequired,
	connTLSOffered:  errTLSOffered,
	connNotStore:    errNotStore,
}

// fast reports whether the verdict is final as soon as it is known: the
// client cannot succeed on that endpoint, however long it tries.
func (k connKind) fast() bool {
	switch k {
	case connNone, connNoTCP, connSilent:
		return false
	}
	return true
}

// probeDelay is how long the client's dial goes on alone before the
// endpoints are probed: a healthy cluster answers well within it.
const probeDelay = 200 * time.Millisecond

// bannerWait is how long a probe listens, before it greets the server,
// for a server that speaks first (SSH, SMTP, ...: not etcd, not
// ZooKeeper).
const bannerWait = 150 * time.Millisecond

// store is what the endpoints should be.
type store struct {
	name string // "etcd" or "ZooKeeper"
	flag string // "--etcd" or "--zk"
	etcd bool
	// tls is the etcd client's TLS configuration (nil: plain, unless an
	// endpoint says https://).
	tls *tls.Config
	// tlsFlags says the TLS came from --cacert, --cert or --key (rather
	// than an https:// endpoint).
	tlsFlags bool
}

// verdict is what the probe of one endpoint found.
type verdict struct {
	ep     string // as given
	addr   string // host:port
	tls    bool   // the client would use TLS
	kind   connKind
	detail string // what was seen, for the message
}

// probe finds endpoint ep's verdict, by deadline at the latest.
func (s store) probe(ctx context.Context, ep string, deadline time.Time) verdict {
	v := verdict{ep: ep}
	var ok bool
	if v.addr, v.tls, ok = s.address(ep); !ok {
		return v // a unix socket or the like: no verdict
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	conn, v := dialProbe(ctx, v)
	if conn == nil {
		return v
	}
	defer conn.Close()
	conn.SetDeadline(deadline)
	if b := readSome(conn, time.Now().Add(bannerWait)); len(b) > 0 {
		v.kind, v.detail = connNotStore, fmt.Sprintf("it spoke first, sending %s before the client said anything (%s never does): another kind of service", quoteBytes(b), s.name)
		return v
	}
	switch {
	case s.etcd && v.tls:
		return s.probeEtcdTLS(ctx, conn, v, deadline)
	case s.etcd:
		return s.probeEtcdPlain(ctx, conn, v, deadline)
	}
	return s.probeZK(ctx, conn, v, deadline)
}

// address returns ep's host:port and whether the client uses TLS there.
func (s store) address(ep string) (addr string, useTLS, ok bool) {
	addr, useTLS = ep, s.tls != nil
	if !s.etcd {
		if _, _, err := net.SplitHostPort(ep); err != nil {
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
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", false, false
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

func (s store) probeEtcdPlain(ctx context.Context, conn net.Conn, v verdict, deadline time.Time) verdict {
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

func (s store) probeEtcdTLS(ctx context.Context, conn net.Conn, v verdict, deadline time.Time) verdict {
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
		v.kind, v.detail = connTLSOffered, "it speaks HTTP/2 without TLS (etcd without TLS), and distlock offered TLS"
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

func (s store) probeZK(ctx context.Context, conn net.Conn, v verdict, deadline time.Time) verdict {
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
		v.kind, v.detail = connNotStore, fmt.Sprintf("an HTTP server answered (%s), not ZooKeeper (etcd's client port? then use --etcd)", firstLine(b))
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

// connError says why none of a store's endpoints could be used. It
// matches (errors.Is) the sentinel of every endpoint's verdict, and the
// client's own error.
type connError struct {
	s        store
	verdicts []verdict
	timeout  time.Duration
	cause    error // the client's error, if it gave one
}

func (e *connError) Unwrap() []error {
	var errs []error
	for _, v := range e.verdicts {
		if err, ok := kindErr[v.kind]; ok {
			errs = append(errs, err)
		}
	}
	if e.cause != nil {
		errs = append(errs, e.cause)
	}
	return errs
}

func (e *connError) Error() string {
	var with []verdict
	for _, v := range e.verdicts {
		if v.kind != connNone {
			with = append(with, v)
		}
	}
	if len(with) == 0 {
		return e.cause.Error()
	}
	if len(with) < len(e.verdicts) && e.cause != nil {
		// Some endpoints look fine: the client's error is the news, the
		// others' verdicts what else is wrong.
		var parts []string
		for _, v := range with {
			parts = append(parts, fmt.Sprintf("%s: %s (%s)", v.ep, e.what(v), e.hint(v, []verdict{v})))
		}
		return fmt.Sprintf("%v; besides, %s", e.cause, strings.Join(parts, "; "))
	}
	same := true
	for _, v := range with {
		same = same && v.kind == with[0].kind
	}
	if same {
		var eps []string
		for _, v := range with {
			eps = append(eps, v.ep)
		}
		return fmt.Sprintf("%s %s: %s: %s", e.s.name, strings.Join(eps, ","), e.what(with[0]), e.hint(with[0], with))
	}
	var parts []string
	for _, v := range with {
		parts = append(parts, fmt.Sprintf("%s: %s (%s)", v.ep, e.what(v), e.hint(v, []verdict{v})))
	}
	return fmt.Sprintf("%s: no endpoint could be used: %s", e.s.name, strings.Join(parts, "; "))
}

// what says what went wrong at v.
func (e *connError) what(v verdict) string {
	switch v.kind {
	case connSilent:
		return fmt.Sprintf("the connection was accepted, but nothing answered within --dial-timeout %v", e.timeout)
	case connNoTCP:
		return fmt.Sprintf("%s within --dial-timeout %v", v.detail, e.timeout)
	case connNotStore:
		return fmt.Sprintf("not %s: %s", e.s.name, v.detail)
	}
	return v.detail
}

// hint says what to do about v, at the endpoints of vs.
func (e *connError) hint(v verdict, vs []verdict) string {
	s := e.s
	var hosts []string
	for _, v := range vs {
		hosts = append(hosts, v.addr)
	}
	addrs := strings.Join(hosts, ", ")
	port := map[bool]string{true: "etcd's client port, usually 2379 (etcd --listen-client-urls)", false: "a server's clientPort, usually 2181"}[s.etcd]
	switch v.kind {
	case connUnknownHost:
		return fmt.Sprintf("check the host name in %s", s.flag)
	case connDNS:
		return fmt.Sprintf("check the machine's DNS, or give an IP address in %s", s.flag)
	case connRefused:
		return fmt.Sprintf("is %s running on %s? start it, or pass %s with %s", s.name, addrs, s.flag, port)
	case connNoRoute:
		return fmt.Sprintf("check the address in %s and this machine's network", s.flag)
	case connNoTCP:
		return fmt.Sprintf("check the address in %s, the firewall, and that the host is up", s.flag)
	case connSilent:
		return fmt.Sprintf("a hung or overloaded server, or not %s? check %s, or raise --dial-timeout", port, s.flag)
	case connTLSRequired:
		if s.etcd {
			return "use an https:// endpoint (or host:port) with --cacert, and --cert and --key if the server wants a client certificate"
		}
		return fmt.Sprintf("distlock talks to ZooKeeper without TLS: pass %s with the plain clientPort", s.flag)
	case connTLSOffered:
		if s.tlsFlags {
			return fmt.Sprintf("the server has no TLS: drop --cacert, --cert and --key (or $ETCDCTL_CACERT, ...) and pass %s http://HOST:PORT, or turn TLS on in etcd (--cert-file, --key-file)", s.flag)
		}
		return fmt.Sprintf("the server has no TLS: pass %s http://HOST:PORT, or turn TLS on in etcd (--cert-file, --key-file)", s.flag)
	case connNotStore:
		if s.etcd {
			return fmt.Sprintf("pass %s with %s, not the peer port (2380) or another service's", s.flag, port)
		}
		return fmt.Sprintf("pass %s with %s", s.flag, port)
	}
	return ""
}

// diagnose probes every endpoint at once; its channel yields the
// verdicts, in the endpoints' order, once all are in.
func (s store) diagnose(ctx context.Context, eps []string, deadline time.Time) <-chan []verdict {
	out := make(chan []verdict, 1)
	go func() {
		vs := make([]verdict, len(eps))
		done := make(chan struct{}, len(eps))
		for i, ep := range eps {
			go func() {
				vs[i] = s.probe(ctx, ep, deadline)
				done <- struct{}{}
			}()
		}
		for range eps {
			<-done
		}
		out <- vs
	}()
	return out
}

// allFast reports whether every endpoint has a fast verdict.
func allFast(vs []verdict) bool {
	for _, v := range vs {
		if !v.kind.fast() {
			return false
		}
	}
	return len(vs) > 0
}

// anyVerdict reports whether some endpoint has a verdict.
func anyVerdict(vs []verdict) bool {
	for _, v := range vs {
		if v.kind != connNone {
			return true
		}
	}
	return false
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
