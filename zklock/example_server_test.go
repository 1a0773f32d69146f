package zklock_test

import (
	"context"
	"log"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/integration"
)

// The examples' ZooKeeper: one server, a process of its own run by the
// integration harness like the tests' ensembles (Java and the ZooKeeper
// jars must be installed: see package integration), started by the first
// example that asks for it and stopped by TestMain. The tests do not use
// it: they start ensembles of their own.
var exampleZK struct {
	once sync.Once
	ens  *integration.ZooKeeperEnsemble
}

// exampleServers returns the address of the ZooKeeper server the examples
// share, starting it on first use. A server that cannot start, ZooKeeper
// missing included, fails the example, as integration.NewZooKeeper fails
// a test: examples never skip. The examples leave no lock entries behind,
// so each starts with empty queues.
func exampleServers() []string {
	exampleZK.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		ens, err := integration.StartZooKeeper(ctx, integration.WithSize(1))
		if err != nil {
			log.Fatalf("examples: start ZooKeeper: %v", err)
		}
		exampleZK.ens = ens
	})
	if exampleZK.ens == nil {
		log.Fatal("examples: ZooKeeper did not start")
	}
	return exampleZK.ens.Addrs()
}

// TestMain stops the examples' ZooKeeper server, if an example started
// one, once everything has run.
func TestMain(m *testing.M) {
	m.Run() // its result goes to os.Exit when TestMain returns
	if exampleZK.ens != nil {
		exampleZK.ens.Close()
	}
}
