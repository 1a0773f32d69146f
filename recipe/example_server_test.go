package recipe_test

import (
	"os"
	"testing"

	"github.com/distlock/distlock/internal/testserve"
)

// TestMain serves the addresses the examples name, localhost:2379 with an
// etcd member and localhost:2181 with one ZooKeeper server, in a child
// process (internal/testserve: Java and the ZooKeeper jars must be
// installed), each started when an example first connects.
func TestMain(m *testing.M) { os.Exit(testserve.Main(m, testserve.Etcd, testserve.ZooKeeper)) }
