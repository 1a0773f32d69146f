package etcdlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/integration/locktest"
	"github.com/distlock/distlock/recipe"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/tests/v3/framework/integration"
	"go.uber.org/zap"
)

// testTimeout bounds every wait in these tests: generous, since it is a
// failure bound, not a timing assertion.
const testTimeout = locktest.Timeout

// The background-Lock helpers of the contract suite serve these tests too.
type result = locktest.Result

var lockAsync = locktest.LockAsync

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	return locktest.Recv(t, ch, what)
}

func successor(t *testing.T, res <-chan result, prev distlock.Token, what string) *distlock.Lease {
	t.Helper()
	return locktest.Successor(t, res, prev, what)
}

func init() {
	// The framework's members tick every 10 ms and call an election after
	// 10 ticks without a heartbeat: on a CI machine of two CPUs running
	// the race detector and other packages' clusters, a 100 ms stall of a
	// leader's goroutines is common, and the elections that follow in a
	// chain failed keepalives for seconds (sessions ended, Txns timed out).
	// 50 ticks (500 ms; etcd's own default is 1 s) keeps the cluster's
	// leader through such stalls; tests that stop a leader wait that much
	// longer for the next.
	integration.ElectionTicks = 50
}

// newCluster starts a real 3-member etcd cluster in this process, with a
// bridge in front of each member so tests can cut clients off. The etcd
// framework also checks, when the test ends, that no goroutine leaked.
func newCluster(t *testing.T) *integration.Cluster {
	t.Helper()
	integration.BeforeTest(t)
	clus := integration.NewCluster(t, &integration.ClusterConfig{Size: 3, UseBridge: true})
	t.Cleanup(func() { clus.Terminate(t) })
	return clus
}

// newClient returns a client that talks to the given member only.
func newClient(t *testing.T, clus *integration.Cluster, member int) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{clus.Members[member].GRPCURL},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// newSession opens a session that is closed when the test ends.
func newSession(t *testing.T, cli *clientv3.Client, opts ...recipe.Option) *etcdlock.Session {
	t.Helper()
	s, err := etcdlock.NewSession(testCtx(t), cli, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Close(ctx)
	})
	return s
}

func newMutex(t *testing.T, s *etcdlock.Session, name string) *recipe.Mutex {
	t.Helper()
	m, err := recipe.NewMutex(s, name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// queueKeys lists the entry keys of a lock, oldest first.
func queueKeys(t *testing.T, cli *clientv3.Client, name string) []string {
	t.Helper()
	resp, err := cli.Get(testCtx(t), etcdlock.DefaultPrefix+name+"/@", clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		if !isTermRecord(kv.Key) {
			keys = append(keys, string(kv.Key))
		}
	}
	return keys
}

// isTermRecord reports whether key is an election's term record, which
// is no entry of a queue.
func isTermRecord(key []byte) bool { return strings.HasSuffix(string(key), "/@l") }

// queueWatcher reports every entry put into a lock's queue, so a test can
// wait for a waiter to have enqueued instead of sleeping.
type queueWatcher struct {
	t  *testing.T
	ch clientv3.WatchChan
}

func watchQueue(t *testing.T, cli *clientv3.Client, name string) *queueWatcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch := cli.Watch(ctx, etcdlock.DefaultPrefix+name+"/@", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	if r := <-ch; !r.Created {
		t.Fatalf("queue watch not created: %v", r.Err())
	}
	return &queueWatcher{t: t, ch: ch}
}

// nextPut waits for the next entry to be enqueued and returns its key.
func (w *queueWatcher) nextPut() string {
	w.t.Helper()
	timeout := time.NewTimer(testTimeout)
	defer timeout.Stop()
	for {
		select {
		case r, ok := <-w.ch:
			if !ok {
				w.t.Fatal("queue watch closed")
			}
			for _, ev := range r.Events {
				if ev.Type == clientv3.EventTypePut && !isTermRecord(ev.Kv.Key) {
					return string(ev.Kv.Key)
				}
			}
		case <-timeout.C:
			w.t.Fatal("timed out waiting for an entry to be enqueued")
		}
	}
}

var (
	mustLock   = locktest.MustLock
	mustUnlock = locktest.MustUnlock
)

func (s *etcdSession) RWMutex(name string) (locktest.RWLocker, error) {
	m, err := recipe.NewRWMutex(s.s, name)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (s *etcdSession) Election(name string) (locktest.Elector, error) {
	e, err := recipe.NewElection(s.s, name)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// waitQueueKeys waits, following a watch on the queue rather than polling
// it, until lock name's queue holds at most max keys or d has passed, and
// returns the keys it holds then.
func waitQueueKeys(t *testing.T, cli *clientv3.Client, name string, max int, d time.Duration) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(testCtx(t), d)
	defer cancel()
	prefix := etcdlock.DefaultPrefix + name + "/@"
	for {
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
		if err != nil {
			if ctx.Err() != nil {
				return queueKeys(t, cli, name)
			}
			t.Fatal(err)
		}
		if len(resp.Kvs) <= max {
			keys := make([]string, len(resp.Kvs))
			for i, kv := range resp.Kvs {
				keys[i] = string(kv.Key)
			}
			return keys
		}
		// Any change after the read: read again.
		select {
		case <-cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)):
		case <-ctx.Done():
			return queueKeys(t, cli, name)
		}
	}
}
