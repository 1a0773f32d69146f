package integration_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/integration"
)

// TestPostgres checks that the harness's server is a real, writable
// PostgreSQL reached through the pgx driver, and that Close leaves no
// process or directory behind.
func TestPostgres(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	pg := integration.NewPostgres(t)

	var version string
	if err := pg.DB().QueryRowContext(ctx, "SHOW server_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL %s at %s", version, pg.Addr())
	var user string
	if err := pg.DB().QueryRowContext(ctx, "SELECT current_user").Scan(&user); err != nil || user != "postgres" {
		t.Fatalf("current_user %q, %v", user, err)
	}

	if _, err := pg.DB().ExecContext(ctx, "CREATE TABLE t (k TEXT PRIMARY KEY, v BIGINT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.DB().ExecContext(ctx, "INSERT INTO t VALUES ($1, $2)", "a", 7); err != nil {
		t.Fatal(err)
	}

	// A database of its own, through a pool of its own.
	dsn, err := pg.CreateDatabase(ctx, "second")
	if err != nil {
		t.Fatal(err)
	}
	db2, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	var n int
	if err := db2.QueryRowContext(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 't'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("table t in the second database: %d, %v", n, err)
	}
	db2.Close()

	// Transactions are real: an uncommitted row is invisible to others.
	tx, err := pg.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO t VALUES ('b', 1)"); err != nil {
		t.Fatal(err)
	}
	if err := pg.DB().QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows seen outside the transaction: %d, %v", n, err)
	}
	tx.Rollback()

	dir := pg.Dir()
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
	if err := pg.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s left behind: %v", dir, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	db, _ := sql.Open("pgx", pg.DSN())
	defer db.Close()
	if err := db.PingContext(cctx); err == nil {
		t.Errorf("the server still answers after Close")
	} else if !strings.Contains(err.Error(), "connect") && !strings.Contains(err.Error(), "refused") {
		t.Logf("ping after Close: %v", err)
	}
}

// TestPostgresTwo checks that two servers run side by side.
func TestPostgresTwo(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	a, b := integration.NewPostgres(t), integration.NewPostgres(t)
	if a.Addr() == b.Addr() {
		t.Fatalf("both servers at %s", a.Addr())
	}
	for _, pg := range []*integration.Postgres{a, b} {
		if err := pg.DB().PingContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPostgresMissing checks that missing binaries are reported as
// ErrNoPostgres, which NewPostgres turns into a failure under CI.
func TestPostgresMissing(t *testing.T) {
	t.Setenv("PG_BINDIR", t.TempDir())
	_, err := integration.StartPostgres(ctxFor(t, time.Minute))
	if !errors.Is(err, integration.ErrNoPostgres) || !strings.Contains(err.Error(), "postgresql") {
		t.Fatalf("StartPostgres without binaries: %v, want ErrNoPostgres naming the postgresql package", err)
	}
}
