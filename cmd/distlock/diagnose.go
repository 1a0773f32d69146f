package main

// Why a cluster could not be reached, told apart: the probes are package
// diagnose's (see there); this file words their verdicts for the
// command, with the flag to fix. When every endpoint has a final verdict
// (diagnose.Error.Final), distlock reports at once; else the client's
// dial goes on, and if it fails the verdicts explain it. The probes start
// only when the dial has not succeeded within probeDelay, so a healthy
// cluster never sees them.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/distlock/distlock/diagnose"
)

// probeDelay is how long the client's dial goes on alone before the
// endpoints are probed: a healthy cluster answers well within it.
const probeDelay = 200 * time.Millisecond

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
type verdict = diagnose.Endpoint

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
		if v.Err != nil {
			errs = append(errs, v.Err)
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
		if v.Err != nil {
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
			parts = append(parts, fmt.Sprintf("%s: %s (%s)", v.Endpoint, e.what(v), e.hint(v, []verdict{v})))
		}
		return fmt.Sprintf("%v; besides, %s", e.cause, strings.Join(parts, "; "))
	}
	same := true
	for _, v := range with {
		same = same && v.Err == with[0].Err && v.Connected == with[0].Connected
	}
	if same {
		var eps []string
		for _, v := range with {
			eps = append(eps, v.Endpoint)
		}
		return fmt.Sprintf("%s %s: %s: %s", e.s.name, strings.Join(eps, ","), e.what(with[0]), e.hint(with[0], with))
	}
	var parts []string
	for _, v := range with {
		parts = append(parts, fmt.Sprintf("%s: %s (%s)", v.Endpoint, e.what(v), e.hint(v, []verdict{v})))
	}
	return fmt.Sprintf("%s: no endpoint could be used: %s", e.s.name, strings.Join(parts, "; "))
}

// what says what went wrong at v.
func (e *connError) what(v verdict) string {
	switch {
	case errors.Is(v.Err, diagnose.ErrTimeout):
		return fmt.Sprintf("%s within --dial-timeout %v", v.Detail, e.timeout)
	case errors.Is(v.Err, diagnose.ErrNotStore):
		return fmt.Sprintf("not %s: %s", e.s.name, v.Detail)
	}
	return v.Detail
}

// hint says what to do about v, at the endpoints of vs.
func (e *connError) hint(v verdict, vs []verdict) string {
	s := e.s
	var hosts []string
	for _, v := range vs {
		hosts = append(hosts, v.Addr)
	}
	addrs := strings.Join(hosts, ", ")
	port := map[bool]string{true: "etcd's client port, usually 2379 (etcd --listen-client-urls)", false: "a server's clientPort, usually 2181"}[s.etcd]
	switch {
	case errors.Is(v.Err, diagnose.ErrUnknownHost):
		return fmt.Sprintf("check the host name in %s", s.flag)
	case errors.Is(v.Err, diagnose.ErrDNS):
		return fmt.Sprintf("check the machine's DNS, or give an IP address in %s", s.flag)
	case errors.Is(v.Err, diagnose.ErrRefused):
		return fmt.Sprintf("is %s running on %s? start it, or pass %s with %s", s.name, addrs, s.flag, port)
	case errors.Is(v.Err, diagnose.ErrNoRoute):
		return fmt.Sprintf("check the address in %s and this machine's network", s.flag)
	case errors.Is(v.Err, diagnose.ErrTimeout) && !v.Connected:
		return fmt.Sprintf("check the address in %s, the firewall, and that the host is up", s.flag)
	case errors.Is(v.Err, diagnose.ErrTimeout):
		return fmt.Sprintf("a hung or overloaded server, or not %s? check %s, or raise --dial-timeout", port, s.flag)
	case errors.Is(v.Err, diagnose.ErrTLSRequired):
		if s.etcd {
			return "use an https:// endpoint (or host:port) with --cacert, and --cert and --key if the server wants a client certificate"
		}
		return fmt.Sprintf("distlock talks to ZooKeeper without TLS: pass %s with the plain clientPort", s.flag)
	case errors.Is(v.Err, diagnose.ErrTLSOffered):
		if s.tlsFlags {
			return fmt.Sprintf("the server has no TLS: drop --cacert, --cert and --key (or $ETCDCTL_CACERT, ...) and pass %s http://HOST:PORT, or turn TLS on in etcd (--cert-file, --key-file)", s.flag)
		}
		return fmt.Sprintf("the server has no TLS: pass %s http://HOST:PORT, or turn TLS on in etcd (--cert-file, --key-file)", s.flag)
	case errors.Is(v.Err, diagnose.ErrBadEndpoint):
		return fmt.Sprintf("fix %s", s.flag)
	case errors.Is(v.Err, diagnose.ErrNotStore):
		if s.etcd {
			return fmt.Sprintf("pass %s with %s, not the peer port (2380) or another service's", s.flag, port)
		}
		return fmt.Sprintf("pass %s with %s", s.flag, port)
	}
	return ""
}

// diagnose probes every endpoint at once; its channel yields the
// verdicts, in the endpoints' order, once all are in (by deadline).
func (s store) diagnose(ctx context.Context, eps []string, deadline time.Time) <-chan []verdict {
	out := make(chan []verdict, 1)
	go func() {
		ctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		kind := diagnose.ZooKeeperStore
		if s.etcd {
			kind = diagnose.EtcdStore
		}
		out <- diagnose.Probe(ctx, kind, eps, s.tls != nil)
	}()
	return out
}

// allFast reports whether every endpoint has a final verdict.
func allFast(vs []verdict) bool {
	return (&diagnose.Error{Endpoints: vs}).Final()
}

// anyVerdict reports whether some endpoint has a verdict.
func anyVerdict(vs []verdict) bool {
	for _, v := range vs {
		if v.Err != nil {
			return true
		}
	}
	return false
}
