package testserve

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// ZooKeeperEnsemble is a ZooKeeper ensemble of the harness, in a child
// process, for tests that need its servers and nothing of its faults.
type ZooKeeperEnsemble struct {
	// Addrs are the servers' client addresses.
	Addrs []string
}

// NewZooKeeper starts an ensemble of size servers on free ports; it stops
// when t's test ends.
func NewZooKeeper(t testing.TB, size int) *ZooKeeperEnsemble {
	t.Helper()
	return &ZooKeeperEnsemble{Addrs: cluster(t, "zookeeper", size)}
}

// zkSessionTimeout is the harness's session timeout of Connect.
const zkSessionTimeout = 10 * time.Second

// Connect opens a session to the ensemble, with the harness's session
// timeout, and returns once the server has granted it.
func (e *ZooKeeperEnsemble) Connect(ctx context.Context) (*zk.Conn, <-chan zk.Event, error) {
	return e.ConnectTimeout(ctx, zkSessionTimeout)
}

// ConnectTimeout is Connect with the given session timeout. The events
// channel is buffered and drops what a test does not read, so that a test
// that ignores it does not block the client.
func (e *ZooKeeperEnsemble) ConnectTimeout(ctx context.Context, timeout time.Duration) (*zk.Conn, <-chan zk.Event, error) {
	conn, ec, err := zk.Connect(e.Addrs, timeout, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
	if err != nil {
		return nil, nil, fmt.Errorf("testserve: ZooKeeper connect to %v: %w", e.Addrs, err)
	}
	out := make(chan zk.Event, 64)
	granted := make(chan struct{})
	go func() {
		defer close(out)
		open := true
		for ev := range ec {
			if open && ev.State == zk.StateHasSession {
				open = false
				close(granted)
			}
			select {
			case out <- ev:
			default:
			}
		}
	}()
	select {
	case <-granted:
		return conn, out, nil
	case <-ctx.Done():
		conn.Close()
		return nil, nil, fmt.Errorf("testserve: ZooKeeper connect to %v: %w", e.Addrs, ctx.Err())
	}
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}
