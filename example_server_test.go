package distlock_test

import (
	"os"
	"testing"

	"github.com/distlock/distlock/integration/examplesrv"
)

// TestMain serves localhost:2379, the address the examples name, with an
// etcd member in this process, started when an example first connects.
func TestMain(m *testing.M) { os.Exit(examplesrv.Main(m, examplesrv.Etcd)) }
