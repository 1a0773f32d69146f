package zklock_test

import (
	"testing"
	"time"

	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/integration/locktest"
	"github.com/distlock/distlock/recipe"
	"github.com/go-zookeeper/zk"
)

// RelayedSession makes zkBackend a locktest.RelayBackend, for the
// contract's step-down cases: a session on a connection of its own, whose
// faults (the ensemble's HoldReplies, CutClient and DropConnection) hit
// this connection alone.
func (b *zkBackend) RelayedSession(t *testing.T) (locktest.Session, locktest.ClientFaults) {
	conn, events := connect(t, b.ens)
	drain(events)
	s := &zkSession{ens: b.ens, conn: conn, s: newSession(t, conn, recipe.WithPrefix(b.prefix))}
	return s, connFaults{ens: b.ens, conn: conn}
}

// connFaults are one connection's faults as locktest.ClientFaults.
type connFaults struct {
	ens  *integration.ZooKeeperEnsemble
	conn *zk.Conn
}

func (f connFaults) HoldReplies() (func(), error) { return f.ens.HoldReplies(f.conn) }
func (f connFaults) Cut() (func(), error)         { return f.ens.CutClient(f.conn) }
func (f connFaults) Reset() error                 { return f.ens.DropConnection(f.conn) }

// TestTryFaults runs the contract's TryLock fault cases (a lost answer,
// a lost request, a context ending while cut off) on a real 3-server
// ensemble, a prefix per case, the TryLock's connection faulted alone.
func TestTryFaults(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)
	locktest.RunTryFaults(t, func(t *testing.T) locktest.Backend { return newBackend(t, ens, admin) })
}

// TestLockDelay runs the contract's lock-delay cases on a real 3-server
// ensemble: a holder's session expired on the servers holds its successor
// back for the delay; a clean Unlock does not.
func TestLockDelay(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)
	locktest.RunLockDelay(t, func(t *testing.T) locktest.DelayBackend { return newBackend(t, ens, admin) })
}

// DelayedSession makes zkBackend a locktest.DelayBackend.
func (b *zkBackend) DelayedSession(t *testing.T, d time.Duration) locktest.Session {
	conn, events := connect(t, b.ens, b.n%3)
	drain(events)
	b.n++
	return &zkSession{ens: b.ens, conn: conn, s: newSession(t, conn, recipe.WithPrefix(b.prefix), recipe.WithLockDelay(d))}
}
