// Package diagnose tells why an etcd or ZooKeeper endpoint cannot be
// used. The clients (etcd's gRPC, go-zookeeper) retry every failure
// until the caller's deadline and then say "context deadline exceeded",
// or wait forever without one, whatever the failure was. This package
// looks at each endpoint itself, the way a person would with nc and
// openssl: it resolves the host, opens a TCP connection, sees whether the
// server speaks first (etcd and ZooKeeper never do), then greets it as
// the client would (HTTP/2's preface for etcd, the srvr four-letter word
// for ZooKeeper) and, when the answer is not the store's, tries TLS on a
// fresh connection. Each endpoint gets a verdict, a sentinel error:
//
//	ErrUnknownHost, ErrDNS, ErrRefused, ErrNoRoute   (fast)
//	ErrBadEndpoint: no port, or not an address        (at once)
//	ErrTLSRequired: a plain client, a TLS server      (fast)
//	ErrTLSOffered: TLS offered to a plain server      (fast)
//	ErrNotStore: not etcd / not ZooKeeper             (fast)
//	ErrTimeout: no answer                             (at the deadline)
//	nil: it answers like the store                    (fast)
//
// All but ErrTimeout are final: waiting will not mend them, so a caller
// may give up at once (Error.Final). etcdlock.NewSession and
// zklock.NewSession run these probes when their first request goes
// unanswered for a second, and the distlock command while it dials.
//
// The package is called diagnose, not probe or health: it does not
// watch a cluster's health, it explains one failure to connect, once,
// when the client has not connected; a cluster that answers never sees
// its probes. Its functions are plain TCP and TLS; they need no client,
// and they tell nothing about credentials, quorum or a server's data.
package diagnose

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The verdicts: every *Error matches (errors.Is) those of its endpoints.
var (
	// ErrUnknownHost: the host name does not resolve.
	ErrUnknownHost = errors.New("unknown host")
	// ErrDNS: the host name's lookup failed otherwise.
	ErrDNS = errors.New("DNS lookup failed")
	// ErrRefused: nothing listens at the address.
	ErrRefused = errors.New("connection refused")
	// ErrNoRoute: the host or its network is unreachable.
	ErrNoRoute = errors.New("no route to host")
	// ErrTimeout: the TCP connect, or the server, did not answer by the
	// deadline. The one verdict that waiting might mend.
	ErrTimeout = errors.New("no answer")
	// ErrTLSRequired: the client would talk plain, the server wants TLS.
	ErrTLSRequired = errors.New("the server requires TLS")
	// ErrTLSOffered: the client would offer TLS, the server has none.
	ErrTLSOffered = errors.New("TLS offered to a server without TLS")
	// ErrNotStore: something else answers there (an HTTP server, etcd's
	// peer port, the other store, another service).
	ErrNotStore = errors.New("not the store")
	// ErrBadEndpoint: the endpoint is not an address the client can dial
	// (no port, an unknown scheme).
	ErrBadEndpoint = errors.New("invalid endpoint")
)

// DefaultTimeout bounds the probes of a context without a deadline.
const DefaultTimeout = 5 * time.Second

// Store is what the endpoints should be.
type Store int

const (
	// EtcdStore is etcd's client port: gRPC over HTTP/2, with or without TLS.
	EtcdStore Store = iota + 1
	// ZooKeeperStore is a ZooKeeper server's clientPort, without TLS.
	ZooKeeperStore
)

// String is the store's name in messages: "etcd" or "ZooKeeper".
func (s Store) String() string {
	if s == EtcdStore {
		return "etcd"
	}
	return "ZooKeeper"
}

// Endpoint is one endpoint's verdict.
type Endpoint struct {
	// Endpoint is as given.
	Endpoint string
	// Addr is the host:port probed ("" when Endpoint is not an address).
	Addr string
	// TLS says the probe talked as a TLS client would.
	TLS bool
	// Err is nil when the endpoint answers like the store (or the probe
	// cannot tell, e.g. for a unix socket), else one of the sentinels.
	Err error
	// Connected says a TCP connection was made: with ErrTimeout, the
	// server accepted it and then said nothing.
	Connected bool
	// Detail says what the probe saw, for a message.
	Detail string
}

// Final reports whether the verdict will not change by waiting.
func (e Endpoint) Final() bool { return e.Err != nil && !errors.Is(e.Err, ErrTimeout) }

// Error says why endpoints of a store cannot be used. It names each one
// with a verdict and matches (errors.Is) their sentinels.
type Error struct {
	Store Store
	// Endpoints are every endpoint probed, in the order given, with
	// their verdicts (some may be nil).
	Endpoints []Endpoint
}

// Final reports whether every endpoint has a verdict that waiting will
// not change: a client of these endpoints cannot succeed.
func (e *Error) Final() bool {
	for _, v := range e.Endpoints {
		if !v.Final() {
			return false
		}
	}
	return len(e.Endpoints) > 0
}

// Unwrap returns the endpoints' verdicts.
func (e *Error) Unwrap() []error {
	var errs []error
	for _, v := range e.Endpoints {
		if v.Err != nil {
			errs = append(errs, v.Err)
		}
	}
	return errs
}

// Error names each endpoint that failed and why, in one line: one
// verdict for them all when they share it.
func (e *Error) Error() string {
	var with []Endpoint
	for _, v := range e.Endpoints {
		if v.Err != nil {
			with = append(with, v)
		}
	}
	if len(with) == 0 {
		return fmt.Sprintf("%s: every endpoint answers", e.Store)
	}
	same := true
	for _, v := range with {
		same = same && v.Err == with[0].Err && v.Detail == with[0].Detail
	}
	if same {
		var eps []string
		for _, v := range with {
			eps = append(eps, v.Endpoint)
		}
		return fmt.Sprintf("%s %s: %s", e.Store, strings.Join(eps, ","), e.What(with[0]))
	}
	var parts []string
	for _, v := range with {
		parts = append(parts, fmt.Sprintf("%s: %s", v.Endpoint, e.What(v)))
	}
	return fmt.Sprintf("%s: %s", e.Store, strings.Join(parts, "; "))
}

// What says what went wrong at endpoint v, in a few words.
func (e *Error) What(v Endpoint) string {
	switch {
	case errors.Is(v.Err, ErrNotStore):
		return fmt.Sprintf("not %s: %s", e.Store, v.Detail)
	case v.Detail == "":
		return v.Err.Error()
	}
	return v.Detail
}

// Etcd probes etcd endpoints as clientv3 takes them (host:port,
// http://host:port, https://host:port; TLS on host:port when tlsConfig is
// not nil), at once, until ctx's deadline (DefaultTimeout without one).
// It returns nil when every endpoint answers like etcd, else an *Error.
// tlsConfig is only looked at for whether it is nil: the probe does not
// verify certificates, which the client does.
func Etcd(ctx context.Context, endpoints []string, tlsConfig *tls.Config) error {
	return result(EtcdStore, Probe(ctx, EtcdStore, endpoints, tlsConfig != nil))
}

// ZooKeeper probes ZooKeeper servers as go-zookeeper takes them (host or
// host:port, port 2181 by default), like Etcd.
func ZooKeeper(ctx context.Context, servers []string) error {
	return result(ZooKeeperStore, Probe(ctx, ZooKeeperStore, servers, false))
}

func result(s Store, vs []Endpoint) error {
	for _, v := range vs {
		if v.Err != nil {
			return &Error{Store: s, Endpoints: vs}
		}
	}
	return nil
}

// Probe probes every endpoint at once and returns the verdicts in the
// endpoints' order, by ctx's deadline (DefaultTimeout without one) at the
// latest. useTLS is whether an etcd client uses TLS on endpoints without
// a scheme.
func Probe(ctx context.Context, s Store, endpoints []string, useTLS bool) []Endpoint {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(DefaultTimeout)
	}
	p := prober{store: s, tls: useTLS}
	vs := make([]Endpoint, len(endpoints))
	done := make(chan struct{}, len(endpoints))
	for i, ep := range endpoints {
		go func() {
			vs[i] = p.probe(ctx, ep, deadline).endpoint()
			done <- struct{}{}
		}()
	}
	for range endpoints {
		<-done
	}
	return vs
}
