package chaos

import (
	"context"
	"fmt"
)

// Faults of one client's connections, while the servers keep talking to
// each other and to every other client: on etcd through the client's own
// relay (integration.ClientRelay), on ZooKeeper through the harness's
// hold on the client's connection (integration.ZooKeeperEnsemble's
// HoldReplies, CutClient, DropConnection).

// replyHolder is a client whose servers' replies can be held
// (etcd-hold-replies, zk-hold-replies).
type replyHolder interface {
	HoldReplies() (release func(), err error)
}

// clientCutter is a client that can be cut off from every server, and
// whose connections can be reset.
type clientCutter interface {
	CutClient() (heal func(), err error)
	ResetConnections() error
}

func (c *etcdClient) HoldReplies() (func(), error) { return c.relay.HoldReplies() }
func (c *etcdClient) CutClient() (func(), error)   { return c.relay.Cut() }
func (c *etcdClient) ResetConnections() error      { c.relay.Reset(); return nil }

func (c *zkClient) CutClient() (func(), error) { return c.e.CutClient(c.conn) }
func (c *zkClient) ResetConnections() error    { return c.DropConnection() }

// clientTarget picks the worker that holds the lock now (a random one if
// none is known) and returns its client as a T.
func clientTarget[T any](env *Env) (string, T, error) {
	i := env.Holder()
	c, ok := env.Clients[i].(T)
	if !ok {
		var zero T
		return "", zero, fmt.Errorf("chaos: client %d of %s cannot take this fault", i, env.Store.Name())
	}
	return fmt.Sprintf("w%d", i), c, nil
}

// injectEtcdHoldReplies holds what the members send the holder's client
// (or a random worker's) on its connections: its keepalives, enqueues
// and releases are applied, their replies wait until the heal, when they
// are delivered in order. Meanwhile the client's session runs out of
// confirmed keepalives and ends on its client-side deadline while the
// members still see the lease kept alive, and its Lock and Unlock calls
// time out on requests that were applied.
func injectEtcdHoldReplies(ctx context.Context, env *Env) (string, func(context.Context) error, error) {
	target, c, err := clientTarget[replyHolder](env)
	if err != nil {
		return "", nil, err
	}
	release, err := c.HoldReplies()
	if err != nil {
		return target, nil, err
	}
	return target, func(context.Context) error { release(); return nil }, nil
}

// injectIsolateClient cuts the holder's client (or a random worker's) off
// from every server, both ways, while the servers keep their quorum and
// their other clients: its session expires on the servers (after the TTL
// on etcd, the session timeout on ZooKeeper) and the holder must have
// been told it lost the lock before anyone else gets it. The heal
// delivers what was held; one time in two it resets the client's
// connections instead, losing it, as a network that dropped their state
// would.
func injectIsolateClient(ctx context.Context, env *Env) (string, func(context.Context) error, error) {
	target, c, err := clientTarget[clientCutter](env)
	if err != nil {
		return "", nil, err
	}
	reset := env.Rand(2) == 0
	heal, err := c.CutClient()
	if err != nil {
		return target, nil, err
	}
	if reset {
		target += " (connections reset at heal)"
	}
	return target, func(context.Context) error {
		var err error
		if reset {
			err = c.ResetConnections()
		}
		heal()
		return err
	}, nil
}
