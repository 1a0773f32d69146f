package etcdlock_test

import (
	"os"
	"testing"

	"github.com/distlock/distlock/integration/examplesrv"
)

// TestMain serves localhost:2379, the address the examples name, with an
// etcd member in this process, started when an example first connects.
// The tests make clusters of their own, on other ports.
func TestMain(m *testing.M) { os.Exit(examplesrv.Main(m, examplesrv.Etcd)) }
