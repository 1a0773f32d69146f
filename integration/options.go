package integration

import (
	"log/slog"
	"syscall"
)

// Provider says how a cluster's servers run.
type Provider int

const (
	// Processes runs each server as a child process of the caller.
	Processes Provider = iota
	// Containers runs each server in a Docker container, through
	// testcontainers-go, on the host's network so that the harness's
	// proxies stand between the servers exactly as with Processes.
	Containers
)

func (p Provider) String() string {
	if p == Containers {
		return "containers"
	}
	return "processes"
}

// Option configures a cluster.
type Option func(*config)

type config struct {
	size     int
	logger   *slog.Logger
	provider Provider
	// tls and rootPassword: see WithTLS and WithAuth (etcd only).
	tls          bool
	rootPassword string
	// reconfig: see WithReconfig (ZooKeeper only).
	reconfig bool
}

func newConfig(opts []Option) config {
	c := config{size: 3, logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithSize sets the number of servers (default 3).
func WithSize(n int) Option { return func(c *config) { c.size = n } }

// WithLogger makes the harness log what it does (silent by default).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithProvider chooses processes (default) or containers.
func WithProvider(p Provider) Option { return func(c *config) { c.provider = p } }

// server is one server of a cluster as the cluster code drives it,
// whatever runs it: a process, or a container.
type server interface {
	start() error
	kill() error
	signal(syscall.Signal) error
	pid() int
	exited() <-chan struct{}
	tail() string
}

// serverSpec says how to run one server.
type serverSpec struct {
	name string
	argv []string // argv[0] is a path on this machine
	env  []string
	log  string   // log file path
	dirs []string // directories the server writes (mounted into containers)
}

func (c config) newServer(s serverSpec) (server, error) {
	if c.provider == Containers {
		return newContainer(c, s)
	}
	return &process{name: s.name, log: c.logger, argv: s.argv, env: s.env, out: s.log}, nil
}
