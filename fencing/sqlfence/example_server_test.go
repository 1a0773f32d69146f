package sqlfence_test

import (
	"os"
	"testing"

	"github.com/distlock/distlock/integration/examplesrv"
)

// TestMain serves localhost:5432, the address the examples' DSN names,
// with a PostgreSQL server (a process run by package integration),
// started when an example first connects. The tests start servers of
// their own, on other ports.
func TestMain(m *testing.M) { os.Exit(examplesrv.Main(m, examplesrv.Postgres)) }
