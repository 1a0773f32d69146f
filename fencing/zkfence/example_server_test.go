package zkfence_test

import (
	"os"
	"testing"

	"github.com/distlock/distlock/internal/testserve"
)

// TestMain serves localhost:2181, the address the examples name, with one
// ZooKeeper server in a child process (internal/testserve: Java and the
// ZooKeeper jars must be installed), started when an example first
// connects.
func TestMain(m *testing.M) { os.Exit(testserve.Main(m, testserve.ZooKeeper)) }
