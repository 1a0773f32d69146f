package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/fencing/fencetest"
	"github.com/distlock/distlock/fencing/sqlfence"
	"github.com/distlock/distlock/integration"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx"
	_ "modernc.org/sqlite"             // "sqlite"
)

const table = sqlfence.DefaultTable

func tok(seq int64) distlock.Token { return fencetest.Tok(seq) }

// store is one real database the tests run against.
type store struct {
	name string
	open func(t *testing.T) *sql.DB
}

// sqliteDSN is the DSN of a SQLite file for concurrent use: writers wait
// for each other (busy timeout) instead of failing with SQLITE_BUSY, and
// transactions take the write lock at BEGIN.
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(20000)&_pragma=journal_mode(WAL)&_txlock=immediate"
}

func openSQLite(t *testing.T) *sql.DB {
	db, err := sql.Open("sqlite", sqliteDSN(filepath.Join(t.TempDir(), "fence.db")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Ping(); err != nil {
		t.Fatal(err)
	}
	return db
}

func openPostgres(t *testing.T) *sql.DB {
	return integration.NewPostgres(t).DB()
}

var stores = []store{{"SQLite", openSQLite}, {"Postgres", openPostgres}}

// newFence returns a fence on db for resource, with the table created.
func newFence(t *testing.T, db *sql.DB, resource string, opts ...sqlfence.Option) *sqlfence.Fence {
	t.Helper()
	f, err := sqlfence.New(table, resource, "ledger", opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CreateTable(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestSQLFenceContract(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			db := s.open(t)
			newFence(t, db, "setup")
			fencetest.Run(t, func(t *testing.T, resource, lock string, opts ...fencing.Option) fencing.Fence {
				f, err := sqlfence.New(table, resource, lock, sqlfence.WithTelemetry(opts...))
				if err != nil {
					t.Fatal(err)
				}
				return f.In(db)
			})
		})
	}
}

// TestSQLFenceQuestionPlaceholders runs the contract with ? placeholders
// on SQLite, which accepts both forms.
func TestSQLFenceQuestionPlaceholders(t *testing.T) {
	db := openSQLite(t)
	newFence(t, db, "setup")
	fencetest.Run(t, func(t *testing.T, resource, lock string, opts ...fencing.Option) fencing.Fence {
		f, err := sqlfence.New(table, resource, lock, sqlfence.WithPlaceholder(sqlfence.Question), sqlfence.WithTelemetry(opts...))
		if err != nil {
			t.Fatal(err)
		}
		return f.In(db)
	})
}

// TestSQLFenceTransaction checks that Admit and the fenced write commit
// together, and roll back together.
func TestSQLFenceTransaction(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			ctx := fencetest.Ctx(t)
			db := s.open(t)
			f := newFence(t, db, "ledger/entries")
			if _, err := db.ExecContext(ctx, "CREATE TABLE entries (seq BIGINT PRIMARY KEY, note TEXT NOT NULL)"); err != nil {
				t.Fatal(err)
			}
			write := func(seq int64, commit bool) error {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				if err := f.Admit(ctx, tx, tok(seq)); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, "INSERT INTO entries (seq, note) VALUES ($1, $2)", seq, "by holder"); err != nil {
					return err
				}
				// Inside the transaction, the admission is visible.
				if n, err := f.Newest(ctx, tx); err != nil || n != tok(seq) {
					t.Fatalf("newest inside the transaction: %v, %v", n, err)
				}
				if !commit {
					return tx.Rollback()
				}
				return tx.Commit()
			}
			entries := func() (seqs []int64) {
				rows, err := db.QueryContext(ctx, "SELECT seq FROM entries ORDER BY seq")
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				for rows.Next() {
					var s int64
					if err := rows.Scan(&s); err != nil {
						t.Fatal(err)
					}
					seqs = append(seqs, s)
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				return seqs
			}
			newest := func() distlock.Token {
				n, err := f.Newest(ctx, db)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}

			if n := newest(); !n.IsZero() {
				t.Fatalf("newest of a fresh fence: %v", n)
			}
			// Committed: both the admission and the write.
			if err := write(5, true); err != nil {
				t.Fatal(err)
			}
			if got := entries(); len(got) != 1 || got[0] != 5 || newest() != tok(5) {
				t.Fatalf("after commit: entries %v, newest %v", got, newest())
			}
			// Rolled back: neither.
			if err := write(9, false); err != nil {
				t.Fatal(err)
			}
			if got := entries(); len(got) != 1 || newest() != tok(5) {
				t.Fatalf("after rollback: entries %v, newest %v", got, newest())
			}
			// 9 was not admitted: 8 still is.
			if err := write(8, true); err != nil {
				t.Fatalf("8 after 9 rolled back: %v", err)
			}
			// A stale holder writes nothing.
			var stale *fencing.StaleError
			if err := write(6, true); !errors.As(err, &stale) || stale.Newest != tok(8) || stale.Token != tok(6) {
				t.Fatalf("stale write: %v", err)
			}
			if got := entries(); len(got) != 2 || got[1] != 8 || newest() != tok(8) {
				t.Fatalf("entries %v, newest %v", got, newest())
			}
			// A refusal leaves the transaction usable: the caller decides.
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if err := f.Admit(ctx, tx, tok(7)); !errors.Is(err, fencing.ErrStale) {
				t.Fatalf("admit 7: %v", err)
			}
			if n, err := f.Newest(ctx, tx); err != nil || n != tok(8) {
				t.Fatalf("after a refusal in the transaction: %v, %v", n, err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// waitBlocked waits until a PostgreSQL backend waits for a lock while
// upserting the fence table: the proof that a second Admit queues behind
// the first transaction rather than being slow.
func waitBlocked(t *testing.T, ctx context.Context, db *sql.DB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO "`+table+`"%'`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the second Admit never waited for a lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSQLFencePostgresConcurrent runs two transactions with tokens 5 and 7
// on one resource of a real PostgreSQL, in both orders, on a resource with
// a row already and on a fresh one.
func TestSQLFencePostgresConcurrent(t *testing.T) {
	db := openPostgres(t)
	for _, seeded := range []bool{true, false} {
		name := "Fresh"
		if seeded {
			name = "Seeded"
		}
		begin := func(t *testing.T, ctx context.Context) *sql.Tx {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tx.Rollback() })
			return tx
		}
		setup := func(t *testing.T, ctx context.Context) *sqlfence.Fence {
			f := newFence(t, db, t.Name())
			if seeded {
				if err := f.In(db).Admit(ctx, tok(1)); err != nil {
					t.Fatal(err)
				}
			}
			return f
		}
		// admitAsync runs Admit in the background.
		admitAsync := func(ctx context.Context, f *sqlfence.Fence, tx *sql.Tx, seq int64) <-chan error {
			ch := make(chan error, 1)
			go func() { ch <- f.Admit(ctx, tx, tok(seq)) }()
			return ch
		}
		t.Run(name+"/NewerCommitsFirst", func(t *testing.T) {
			ctx := fencetest.Ctx(t)
			f := setup(t, ctx)
			tx5, tx7 := begin(t, ctx), begin(t, ctx)
			if err := f.Admit(ctx, tx7, tok(7)); err != nil {
				t.Fatal(err)
			}
			done := admitAsync(ctx, f, tx5, 5)
			waitBlocked(t, ctx, db)
			if err := tx7.Commit(); err != nil {
				t.Fatal(err)
			}
			var stale *fencing.StaleError
			if err := <-done; !errors.As(err, &stale) || stale.Token != tok(5) || stale.Newest != tok(7) {
				t.Fatalf("5 after 7 committed: %v", err)
			}
			// The refused upsert still holds the row until tx5 ends (the
			// documented reason to roll a refused transaction back at once).
			tx := begin(t, ctx)
			blocked := admitAsync(ctx, f, tx, 5)
			waitBlocked(t, ctx, db)
			if err := tx5.Rollback(); err != nil {
				t.Fatal(err)
			}
			if err := <-blocked; !errors.As(err, &stale) || stale.Newest != tok(7) {
				t.Fatalf("5 after 7 committed: %v", err)
			}
			tx.Rollback()
			// And then 5 is refused at once.
			tx = begin(t, ctx)
			if err := f.Admit(ctx, tx, tok(5)); !errors.As(err, &stale) || stale.Newest != tok(7) {
				t.Fatalf("5 after 7 committed: %v", err)
			}
		})
		t.Run(name+"/OlderHoldsFirst", func(t *testing.T) {
			ctx := fencetest.Ctx(t)
			f := setup(t, ctx)
			tx5, tx7 := begin(t, ctx), begin(t, ctx)
			if err := f.Admit(ctx, tx5, tok(5)); err != nil {
				t.Fatal(err)
			}
			done := admitAsync(ctx, f, tx7, 7)
			waitBlocked(t, ctx, db)
			select {
			case err := <-done:
				t.Fatalf("7 did not wait for 5's transaction: %v", err)
			default:
			}
			if err := tx5.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("7 after 5 committed: %v", err)
			}
			if err := tx7.Commit(); err != nil {
				t.Fatal(err)
			}
			if n, err := f.Newest(ctx, db); err != nil || n != tok(7) {
				t.Fatalf("newest %v, %v", n, err)
			}
		})
		t.Run(name+"/NewerRollsBack", func(t *testing.T) {
			ctx := fencetest.Ctx(t)
			f := setup(t, ctx)
			tx5, tx7 := begin(t, ctx), begin(t, ctx)
			if err := f.Admit(ctx, tx7, tok(7)); err != nil {
				t.Fatal(err)
			}
			done := admitAsync(ctx, f, tx5, 5)
			waitBlocked(t, ctx, db)
			if err := tx7.Rollback(); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("5 after 7 rolled back: %v", err)
			}
			if err := tx5.Commit(); err != nil {
				t.Fatal(err)
			}
			if n, err := f.Newest(ctx, db); err != nil || n != tok(5) {
				t.Fatalf("newest %v, %v", n, err)
			}
		})
	}
}

func TestSQLFenceBadInput(t *testing.T) {
	long := strings.Repeat("r", sqlfence.MaxResourceLen+1)
	for _, c := range []struct{ table, resource, lock string }{
		{"", "r", "ledger"},
		{"Fence", "r", "ledger"},
		{"1fence", "r", "ledger"},
		{"fence-table", "r", "ledger"},
		{`fence"; DROP TABLE x; --`, "r", "ledger"},
		{"public.fence", "r", "ledger"},
		{strings.Repeat("t", 64), "r", "ledger"},
		{"fence", "", "ledger"},
		{"fence", "a\x00b", "ledger"},
		{"fence", "\xff", "ledger"},
		{"fence", long, "ledger"},
		{"fence", "r", ""},
		{"fence", "r", "bad name"},
		{"fence", "r", "a@b"},
	} {
		want := fencing.ErrInvalidArgument // a bad table or resource name
		if c.table == "fence" && c.resource == "r" {
			want = distlock.ErrInvalidName
		}
		if f, err := sqlfence.New(c.table, c.resource, c.lock); !errors.Is(err, want) {
			t.Errorf("New(%.80q, %.80q, %q) = %v, %v; want %v", c.table, c.resource, c.lock, f, err, want)
		} else if len(err.Error()) > 300 {
			t.Errorf("New(%.80q, %.80q, %q): a %d-byte message", c.table, c.resource, c.lock, len(err.Error()))
		}
	}
	if _, err := sqlfence.New("fence", "r", "bad name"); !errors.Is(err, distlock.ErrInvalidName) {
		t.Errorf("bad lock name: %v, want ErrInvalidName", err)
	}
	if _, err := sqlfence.New("fence", "r", "ledger", sqlfence.WithPlaceholder(7)); !errors.Is(err, fencing.ErrInvalidArgument) {
		t.Errorf("unknown placeholder form: %v, want ErrInvalidArgument", err)
	}
	if err := sqlfence.AdmitAll(context.Background(), nil, []distlock.Token{tok(3)}, nil); !errors.Is(err, fencing.ErrInvalidArgument) {
		t.Errorf("AdmitAll with a nil fence: %v, want ErrInvalidArgument", err)
	}
	for _, ok := range []string{"_f", "fence_2", strings.Repeat("t", 63)} {
		if _, err := sqlfence.New(ok, "any resource: 'quoted' \"text\" ünïcode", "ledger/eu"); err != nil {
			t.Errorf("New(%q): %v", ok, err)
		}
	}

	ctx := fencetest.Ctx(t)
	db := openSQLite(t)
	// Invalid and foreign tokens are refused before the database is
	// touched: here its table does not even exist.
	f, err := sqlfence.New("missing", "r", "ledger")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Admit(ctx, db, distlock.Token{Name: "ledger"}); !errors.Is(err, distlock.ErrInvalidToken) {
		t.Errorf("invalid token: %v", err)
	}
	if err := f.Admit(ctx, db, distlock.Token{Name: "other", Seq: 3, Owner: fencetest.Owner}); !errors.Is(err, fencing.ErrForeignToken) {
		t.Errorf("foreign token: %v", err)
	}
	// A missing table is a database error, not a refusal.
	err = f.Admit(ctx, db, tok(3))
	if err == nil || errors.Is(err, fencing.ErrStale) || errors.Is(err, fencing.ErrForeignToken) {
		t.Errorf("admit without the table: %v", err)
	}

	// A row written for another lock refuses this lock's tokens.
	g := newFence(t, db, "shared")
	other, err := sqlfence.New(table, "shared", "ledger/g2")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.In(db).Admit(ctx, tok(10)); err != nil {
		t.Fatal(err)
	}
	if err := other.In(db).Admit(ctx, distlock.Token{Name: "ledger/g2", Seq: 50, Owner: fencetest.Owner}); !errors.Is(err, fencing.ErrForeignToken) || errors.Is(err, fencing.ErrStale) {
		t.Errorf("token of a renamed lock against the old lock's row: %v", err)
	}
	if n, err := g.Newest(ctx, db); err != nil || n != tok(10) {
		t.Errorf("the old lock's row changed: %v, %v", n, err)
	}
	if !strings.Contains(g.Schema(), `"`+table+`"`) || g.Table() != table || g.Resource() != "shared" || g.Lock() != "ledger" {
		t.Errorf("accessors: %q %q %q %q", g.Schema(), g.Table(), g.Resource(), g.Lock())
	}
}

// TestSQLFenceMigrate upgrades a table of the schema before tokens named
// their owner: before Migrate, Admit fails (it never admits); after it,
// the old row orders tokens as before and refuses its own number as a
// fork, since the owner it was admitted for is unknown.
func TestSQLFenceMigrate(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			ctx := fencetest.Ctx(t)
			db := s.open(t)
			const old = "distlock_fence_v1"
			if _, err := db.ExecContext(ctx, `CREATE TABLE "`+old+`" (resource TEXT PRIMARY KEY, lock_name TEXT NOT NULL, seq BIGINT NOT NULL)`); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, `INSERT INTO "`+old+`" (resource, lock_name, seq) VALUES ('r', 'ledger', 5)`); err != nil {
				t.Fatal(err)
			}
			f, err := sqlfence.New(old, "r", "ledger")
			if err != nil {
				t.Fatal(err)
			}
			if err := f.CreateTable(ctx, db); err != nil { // leaves the old table as it is
				t.Fatal(err)
			}
			if err := f.In(db).Admit(ctx, tok(9)); err == nil || fencing.Reason(err) != "" {
				t.Fatalf("admit on the old schema: %v, want a database error", err)
			}
			if !strings.Contains(f.Migration(), "ADD COLUMN owner_id BIGINT NOT NULL DEFAULT 0") {
				t.Errorf("Migration() = %q", f.Migration())
			}
			for range 2 { // the second run finds the column and does nothing
				if err := f.Migrate(ctx, db); err != nil {
					t.Fatal(err)
				}
			}
			legacy := distlock.Token{Name: "ledger", Seq: 5}
			if n, err := f.Newest(ctx, db); err != nil || n != legacy {
				t.Fatalf("Newest after the migration: %#v, %v, want %#v", n, err, legacy)
			}
			var (
				stale *fencing.StaleError
				fork  *fencing.ForkError
			)
			if err := f.In(db).Admit(ctx, tok(4)); !errors.As(err, &stale) || stale.Newest != legacy {
				t.Fatalf("admit 4: %v, want a *StaleError naming %#v", err, legacy)
			}
			if err := f.In(db).Admit(ctx, tok(5)); !errors.As(err, &fork) || fork.Admitted != legacy {
				t.Fatalf("admit 5: %v, want a *ForkError naming %#v", err, legacy)
			}
			if err := f.In(db).Admit(ctx, tok(6)); err != nil {
				t.Fatalf("admit 6: %v", err)
			}
			// An owner with the top bit set is stored as a negative BIGINT
			// and read back unchanged.
			hi := distlock.Token{Name: "ledger", Seq: 7, Owner: 0x8100017d2c5a0000}
			if err := f.In(db).Admit(ctx, hi); err != nil {
				t.Fatalf("admit %v: %v", hi, err)
			}
			if n, err := f.Newest(ctx, db); err != nil || n != hi {
				t.Fatalf("Newest: %v, %v, want %v", n, err, hi)
			}
			if err := f.In(db).Admit(ctx, hi); err != nil {
				t.Fatalf("admit %v again: %v", hi, err)
			}
		})
	}
}
