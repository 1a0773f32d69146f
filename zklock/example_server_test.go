package zklock_test

import (
	"os"
	"testing"

	"github.com/distlock/distlock/integration/examplesrv"
)

// TestMain serves localhost:2181, the address the examples name, with one
// ZooKeeper server (a process run by package integration: Java and the
// ZooKeeper jars must be installed), started when an example first
// connects. The tests start ensembles of their own, on other ports.
func TestMain(m *testing.M) { os.Exit(examplesrv.Main(m, examplesrv.ZooKeeper)) }
