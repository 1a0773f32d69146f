package etcdlock_test

import (
	"context"
	"log"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/integration/embedded"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The examples' etcd: one member in this process (package embedded),
// started by the first example that asks for it and stopped by TestMain.
// The tests do not use it: they make clusters of their own.
var exampleEtcd struct {
	once sync.Once
	etcd *embedded.Etcd
}

// exampleEndpoints returns the endpoints of the etcd member the examples
// share, starting it on first use, and empties it first, so that every
// example starts from an empty store whatever ran before it (markers and
// revocation records outlive their sessions). A member that cannot start
// fails the example: examples never skip.
func exampleEndpoints() []string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exampleEtcd.once.Do(func() {
		e, err := embedded.StartEtcd(ctx)
		if err != nil {
			log.Fatalf("examples: start an embedded etcd: %v", err)
		}
		exampleEtcd.etcd = e
	})
	if exampleEtcd.etcd == nil {
		log.Fatal("examples: the embedded etcd did not start")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: exampleEtcd.etcd.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatalf("examples: %v", err)
	}
	defer cli.Close()
	if _, err := cli.Delete(ctx, "", clientv3.WithPrefix()); err != nil {
		log.Fatalf("examples: empty the embedded etcd: %v", err)
	}
	return exampleEtcd.etcd.Endpoints()
}

// TestMain stops the examples' etcd member, if an example started one,
// once everything has run.
func TestMain(m *testing.M) {
	m.Run() // its result goes to os.Exit when TestMain returns
	if exampleEtcd.etcd != nil {
		exampleEtcd.etcd.Close()
	}
}
