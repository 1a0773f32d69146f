// Package embedetcd starts a single etcd member inside the current process,
// in a temporary directory, for the demo command and, through the public
// package integration/embedded (which wraps it), for the examples and
// users' own examples and tests: real etcd, no setup. It is not for
// production or for tests of failure modes (those use multi-member
// clusters).
package embedetcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Server is a running embedded etcd member.
type Server struct {
	etcd *embed.Etcd
	dir  string
	// Endpoint is the member's client URL.
	Endpoint string
}

// Start runs an etcd member on free loopback ports, with its data in a new
// temporary directory, and waits until it serves. Close stops it and
// removes the directory.
func Start(ctx context.Context) (*Server, error) { return StartAt(ctx, "") }

// StartAt is Start with the client URL on addr (host:port, the host an IP
// address or localhost); "" means a free loopback port. A given address
// that is taken is an error, not retried.
func StartAt(ctx context.Context, addr string) (*Server, error) {
	dir, err := os.MkdirTemp("", "distlock-etcd-*")
	if err != nil {
		return nil, err
	}
	// A port found free can be taken by another process before etcd binds
	// it (test packages run in parallel): then try new ports, in a fresh
	// data directory, a few times.
	for attempt := 0; ; attempt++ {
		sub := filepath.Join(dir, strconv.Itoa(attempt))
		srv, err := start(ctx, sub, addr)
		if err == nil {
			srv.dir = dir
			return srv, nil
		}
		inUse := errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
		if !inUse || attempt == 4 || addr != "" {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

func start(ctx context.Context, dir, addr string) (*Server, error) {
	if addr == "" {
		cport, err := freePort()
		if err != nil {
			return nil, err
		}
		addr = fmt.Sprintf("127.0.0.1:%d", cport)
	} else if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("embedetcd: client address %q: want host:port: %w", addr, err)
	}
	pport, err := freePort()
	if err != nil {
		return nil, err
	}
	curl := url.URL{Scheme: "http", Host: addr}
	purl := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", pport)}

	cfg := embed.NewConfig()
	cfg.Name = "demo"
	cfg.Dir = dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{curl}, []url.URL{curl}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{purl}, []url.URL{purl}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: start: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedetcd: %w", err)
	case <-ctx.Done():
		e.Close()
		return nil, context.Cause(ctx)
	case <-time.After(time.Minute):
		e.Close()
		return nil, fmt.Errorf("embedetcd: member not ready after a minute")
	}
	return &Server{etcd: e, dir: dir, Endpoint: curl.String()}, nil
}

// freePort asks the kernel for a loopback port that is free now. Another
// process could take it before etcd binds it; Start then tries again.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Client returns a new client of the member; the caller closes it.
func (s *Server) Client() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   []string{s.Endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
}

// Close stops the member and removes its data directory.
func (s *Server) Close() error {
	s.etcd.Close()
	return os.RemoveAll(s.dir)
}
