package sqlfence_test

import (
	"os"
	"testing"

	"github.com/distlock/distlock/internal/testserve"
)

// TestMain serves localhost:5432, the address the examples' DSN names,
// with a PostgreSQL server in a child process (internal/testserve),
// started when an example first connects.
func TestMain(m *testing.M) { os.Exit(testserve.Main(m, testserve.Postgres)) }
