package backend

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/connectivity"
)

// Credentials refused by a server must be a clear error at once, never a
// wait until --dial-timeout that ends in "context deadline exceeded": the
// etcd client retries a failed TLS handshake like any connection failure
// (its requests wait for a ready connection), so the cause never reaches
// the caller. pingEtcd watches the client's
// connection; when it fails, a direct handshake with each endpoint finds
// out whether credentials were refused, and says which and why.

// ErrCredentials marks a refusal of the client's credentials.
var ErrCredentials = errors.New("credentials refused")

// pingEtcd reads key once through cli (the client dials lazily, so this
// is where an unreachable cluster or refused credentials show up). It
// returns early, with an error matching ErrCredentials, when the
// connection failed and every endpoint refused the TLS credentials (or the
// lack of them); after a failed read, with one when any endpoint did.
func (c *Client) pingEtcd(parent context.Context, cli *clientv3.Client, key string) error {
	ctx, cancel := context.WithTimeout(parent, c.cfg.DialTimeout)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		_, err := cli.Get(ctx, key, clientv3.WithCountOnly())
		got <- err
	}()
	failed := make(chan struct{})
	go func() {
		conn := cli.ActiveConnection()
		for s := conn.GetState(); ; s = conn.GetState() {
			if s == connectivity.TransientFailure {
				close(failed)
				return
			}
			if !conn.WaitForStateChange(ctx, s) {
				return
			}
		}
	}()
	var err error
	select {
	case err = <-got:
	case <-failed:
		if cerr := c.probeEtcd(parent, true); cerr != nil {
			return cerr
		}
		// Not refused everywhere: unreachable for now, which may pass.
		err = <-got
	}
	if err == nil || parent.Err() != nil || c.etcdAuthFailed(err, "") != nil {
		// Done; or cancelled by the caller (a signal); or the server
		// answered, so the connection's credentials were accepted.
		return err
	}
	if cerr := c.probeEtcd(parent, false); cerr != nil {
		return cerr
	}
	return err
}

// probeEtcd connects to every endpoint as the client would and returns an
// error (matching ErrCredentials) when each one (all) or any one (!all)
// refused the credentials; nil otherwise. It takes at most about
// min(--dial-timeout, 3s) + 1s, and ends with ctx.
func (c *Client) probeEtcd(ctx context.Context, all bool) error {
	eps, tc := c.cfg.Endpoints, c.cfg.TLS
	errs := make(chan error, len(eps))
	for _, ep := range eps {
		go func() { errs <- probeEndpoint(ctx, ep, tc, min(c.cfg.DialTimeout, 3*time.Second)) }()
	}
	var refused []error
	for range eps {
		if err := <-errs; err != nil {
			refused = append(refused, err)
		}
	}
	if len(refused) == 0 || all && len(refused) < len(eps) {
		return nil
	}
	return refused[0] // one line: the first is as good as all
}

// probeEndpoint returns an error matching ErrCredentials when ep refused
// the credentials of tc (nil: plain connections), or asked for TLS from a
// plain client; nil otherwise, including when ep could not be reached.
func probeEndpoint(ctx context.Context, ep string, tc *tls.Config, timeout time.Duration) error {
	addr, useTLS := ep, tc != nil
	if u, err := url.Parse(ep); err == nil && u.Host != "" {
		switch u.Scheme {
		case "http":
			addr, useTLS = u.Host, false
		case "https":
			addr, useTLS = u.Host, true
		default:
			return nil // unix sockets and the like: no verdict
		}
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	d := net.Dialer{Timeout: timeout}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil
	}
	defer raw.Close()
	defer context.AfterFunc(ctx, func() { raw.Close() })()
	raw.SetDeadline(time.Now().Add(timeout))
	if !useTLS {
		// A plain client of a TLS server: does the server complete a
		// handshake and agree to HTTP/2, as etcd's gRPC port does? Then
		// it wants TLS. A TLS server that does not speak h2 (an HTTPS
		// proxy, a web server) is not etcd: no verdict here.
		probe := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
		if probe.Handshake() == nil && probe.ConnectionState().NegotiatedProtocol == "h2" {
			return refusedf(ep, "the server requires TLS: use an https:// endpoint (or host:port) with --cacert, --cert and --key")
		}
		return nil
	}
	cfg := tc
	if cfg == nil {
		cfg = &tls.Config{}
	}
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	cfg.NextProtos = []string{"h2"}
	conn := tls.Client(raw, cfg)
	if err := conn.Handshake(); err != nil {
		return tlsRefusal(ep, err, tc != nil && tc.RootCAs != nil)
	}
	// With TLS 1.3 the server judges the client certificate after the
	// client's side of the handshake is done, and says so in an alert:
	// read briefly for it. A server that accepted us sends its HTTP/2
	// settings (gRPC does at once), or waits for the client's first
	// request and the read times out.
	conn.SetReadDeadline(time.Now().Add(min(timeout, time.Second)))
	if _, err := conn.Read(make([]byte, 1)); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil
		}
		return tlsRefusal(ep, err, true)
	}
	return nil
}

// tlsRefusal says in one line why a TLS handshake with ep failed, when the
// reason is the credentials; nil for other failures.
func tlsRefusal(ep string, err error, haveCA bool) error {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	ca := "--cacert"
	if !haveCA {
		ca = "--cacert (none given, so the system's CAs)"
	}
	msg := err.Error()
	switch {
	case errors.As(err, &unknown):
		return refusedf(ep, "TLS: the server's certificate is not signed by a CA in %s (%v)", ca, err)
	case errors.As(err, &hostname):
		return refusedf(ep, "TLS: the server's certificate is not valid for this endpoint's address (%v)", err)
	case errors.As(err, &invalid):
		return refusedf(ep, "TLS: the server's certificate is not valid (%v)", err)
	case strings.Contains(msg, "remote error: tls: expired certificate"):
		return refusedf(ep, "TLS: the server refused the client certificate: it has expired; renew --cert (%v)", err)
	case strings.Contains(msg, "remote error: tls: certificate required"):
		return refusedf(ep, "TLS: the server refused the client certificate: it requires one signed by a CA it trusts, and --cert gave none that is (%v)", err)
	case strings.Contains(msg, "remote error: tls: unknown certificate authority"),
		strings.Contains(msg, "remote error: tls: bad certificate"),
		strings.Contains(msg, "remote error: tls: certificate revoked"),
		strings.Contains(msg, "remote error: tls: unsupported certificate"),
		strings.Contains(msg, "remote error: tls: access denied"):
		return refusedf(ep, "TLS: the server refused the client certificate in --cert (%v)", err)
	case strings.Contains(msg, "remote error: tls:"), strings.Contains(msg, "tls: first record does not look like a TLS handshake"):
		return refusedf(ep, "TLS handshake failed (%v)", err)
	}
	return nil
}

func refusedf(ep, format string, args ...any) error {
	return &credError{fmt.Sprintf("etcd %s refused the credentials: ", ep) + fmt.Sprintf(format, args...)}
}

// credError is a refusal of credentials, matching ErrCredentials.
type credError struct{ msg string }

func (e *credError) Error() string        { return e.msg }
func (e *credError) Is(target error) bool { return target == ErrCredentials }

// etcdAuthFailed says in one line that etcd refused the user (or the
// client certificate's CN, which etcd takes as the user when no password
// is given) or its permissions; nil for other errors. prefix is where the
// command reads and writes ("" before it got that far).
func (c *Client) etcdAuthFailed(err error, prefix string) error {
	user := c.cfg.User
	if u, _, ok := strings.Cut(user, ":"); ok {
		user = u
	}
	who := fmt.Sprintf("user %q", user)
	if user == "" {
		who = "the client (no --user; with --cert, etcd takes the user from the certificate's CN)"
	}
	is := func(target error) bool {
		// The dial's login returns the server's status unconverted.
		return errors.Is(err, target) || strings.Contains(err.Error(), target.Error())
	}
	switch {
	case is(rpctypes.ErrAuthFailed):
		return &credError{fmt.Sprintf("etcd %s refused the credentials: authentication failed for %s: check --user and --password (%v)", c.endpoints(), who, err)}
	case is(rpctypes.ErrPermissionDenied):
		return &credError{fmt.Sprintf("etcd %s refused the credentials: permission denied to %s: it needs read and write permission on the keys under %q (%v)", c.endpoints(), who, prefix, err)}
	case is(rpctypes.ErrUserEmpty), is(rpctypes.ErrInvalidAuthToken), is(rpctypes.ErrAuthOldRevision):
		return &credError{fmt.Sprintf("etcd %s refused the credentials: authentication is on and %s has none it accepts: give --user and --password, or a client certificate whose CN is a user (%v)", c.endpoints(), who, err)}
	}
	return nil
}
