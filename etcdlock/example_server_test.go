package etcdlock_test

import (
	"os"
	"testing"

	"github.com/distlock/distlock/internal/testserve"
)

// TestMain serves localhost:2379, the address the examples name, with an
// etcd member in a child process (internal/testserve), started when an
// example first connects.
func TestMain(m *testing.M) { os.Exit(testserve.Main(m, testserve.Etcd)) }
