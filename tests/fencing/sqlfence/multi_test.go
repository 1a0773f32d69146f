package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/fencing/fencetest"
	"github.com/distlock/distlock/fencing/sqlfence"
)

// sqlMulti is AdmitAll for the multi contract: Write admits in a
// transaction of its own and appends the entry to a ledger table in it.
type sqlMulti struct {
	db     *sql.DB
	fences []*sqlfence.Fence
	ledger string
}

const ledgerSchema = `CREATE TABLE IF NOT EXISTS fence_ledger (ledger TEXT NOT NULL, pos BIGINT NOT NULL, entry BIGINT NOT NULL, PRIMARY KEY (ledger, pos))`

func (m sqlMulti) Write(ctx context.Context, tokens []distlock.Token, entry int64) error {
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := sqlfence.AdmitAll(ctx, tx, tokens, m.fences...); err != nil {
		return err
	}
	// The fences' rows are held from here to the commit: writers of
	// overlapping fences append in commit order.
	if _, err := tx.ExecContext(ctx, `INSERT INTO fence_ledger (ledger, pos, entry)
		SELECT $1, COALESCE(MAX(pos), 0) + 1, $2 FROM fence_ledger WHERE ledger = $3`, m.ledger, entry, m.ledger); err != nil {
		return err
	}
	return tx.Commit()
}

func (m sqlMulti) Newest(ctx context.Context) ([]distlock.Token, error) {
	ts := make([]distlock.Token, len(m.fences))
	for i, f := range m.fences {
		var err error
		if ts[i], err = f.Newest(ctx, m.db); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

func (m sqlMulti) Ledger(ctx context.Context) ([]int64, error) {
	rows, err := m.db.QueryContext(ctx, "SELECT entry FROM fence_ledger WHERE ledger = $1 ORDER BY pos", m.ledger)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var entries []int64
	for rows.Next() {
		var e int64
		if err := rows.Scan(&e); err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	return entries, rows.Err()
}

func TestSQLFenceAdmitAllContract(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			db := s.open(t)
			newFence(t, db, "setup")
			if _, err := db.Exec(ledgerSchema); err != nil {
				t.Fatal(err)
			}
			fencetest.RunMulti(t, func(t *testing.T, ledger string, resources, locks []string, opts ...fencing.Option) fencetest.Multi {
				m := sqlMulti{db: db, ledger: ledger}
				for i, r := range resources {
					f, err := sqlfence.New(table, r, locks[i], sqlfence.WithTelemetry(opts...))
					if err != nil {
						t.Fatal(err)
					}
					m.fences = append(m.fences, f)
				}
				return m
			})
		})
	}
}

// TestSQLFenceAdmitAll checks that AdmitAll admits in the write's
// transaction (a rollback undoes every admission), names the refusing
// fence, and refuses what does not pair up before touching the database.
func TestSQLFenceAdmitAll(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			ctx := fencetest.Ctx(t)
			db := s.open(t)
			a, err := sqlfence.New(table, "accounts/alice", "accounts/alice")
			if err != nil {
				t.Fatal(err)
			}
			b, err := sqlfence.New(table, "accounts/bob", "accounts/bob")
			if err != nil {
				t.Fatal(err)
			}
			if err := a.CreateTable(ctx, db); err != nil {
				t.Fatal(err)
			}
			toks := func(seq int64) []distlock.Token {
				return fencetest.MultiToks(seq, "accounts/alice", "accounts/bob")
			}
			in := func(f func(tx *sql.Tx) error, commit bool) error {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback()
				if err := f(tx); err != nil {
					return err
				}
				if commit {
					return tx.Commit()
				}
				return tx.Rollback()
			}
			newest := func(f *sqlfence.Fence) int64 {
				n, err := f.Newest(ctx, db)
				if err != nil {
					t.Fatal(err)
				}
				return n.Seq
			}
			// Rolled back: neither fence admitted.
			if err := in(func(tx *sql.Tx) error { return sqlfence.AdmitAll(ctx, tx, toks(9), b, a) }, false); err != nil {
				t.Fatal(err)
			}
			if newest(a) != 0 || newest(b) != 0 {
				t.Fatalf("after rollback: %d %d", newest(a), newest(b))
			}
			if err := in(func(tx *sql.Tx) error { return sqlfence.AdmitAll(ctx, tx, toks(5), b, a) }, true); err != nil {
				t.Fatal(err)
			}
			if newest(a) != 5 || newest(b) != 5 {
				t.Fatalf("after commit: %d %d", newest(a), newest(b))
			}
			// bob alone moves on; then 6 is refused, naming bob's fence.
			if err := b.In(db).Admit(ctx, fencetest.MultiTok("accounts/bob", 7)); err != nil {
				t.Fatal(err)
			}
			err = in(func(tx *sql.Tx) error { return sqlfence.AdmitAll(ctx, tx, toks(6), a, b) }, true)
			var stale *fencing.StaleError
			if !errors.As(err, &stale) || !strings.Contains(stale.Resource, `"accounts/bob"`) || stale.Newest.Seq != 7 {
				t.Fatalf("6 after bob's 7: %v, want a *StaleError of bob's fence naming 7", err)
			}
			if newest(a) != 5 {
				t.Fatalf("alice's fence changed by a refused write: %d", newest(a))
			}

			// Refused before the database is touched: its table does not
			// exist for these fences.
			m1, _ := sqlfence.New("missing", "r1", "accounts/alice")
			m2, _ := sqlfence.New("missing", "r2", "accounts/bob")
			m3, _ := sqlfence.New("missing", "r1", "accounts/bob")
			for _, c := range []struct {
				why    string
				tokens []distlock.Token
				fences []*sqlfence.Fence
				want   error
			}{
				{"no token of bob", toks(3)[:1], []*sqlfence.Fence{m1, m2}, fencing.ErrUnmatched},
				{"no fences", toks(3), nil, fencing.ErrUnmatched},
				{"invalid token", []distlock.Token{fencetest.MultiTok("accounts/alice", 3), {Name: "accounts/bob", Seq: 3}}, []*sqlfence.Fence{m1, m2}, distlock.ErrInvalidToken},
				{"one resource twice", toks(3), []*sqlfence.Fence{m1, m3}, nil},
				{"nil fence", toks(3), []*sqlfence.Fence{m1, nil}, nil},
			} {
				err := sqlfence.AdmitAll(ctx, db, c.tokens, c.fences...)
				if err == nil || c.want != nil && !errors.Is(err, c.want) {
					t.Errorf("%s: %v, want %v", c.why, err, c.want)
				}
			}
		})
	}
}

// TestSQLFenceAdmitAllOrder shows the fixed order on PostgreSQL: a
// transaction holds alice's row, and AdmitAll(bob, alice) in another waits
// for alice's row first, holding nothing, so the first transaction can
// still take bob's row. Taking the rows in the order given would deadlock
// the two.
func TestSQLFenceAdmitAllOrder(t *testing.T) {
	ctx := fencetest.Ctx(t)
	db := openPostgres(t)
	newFence(t, db, "setup")
	a, _ := sqlfence.New(table, "r-alice", "accounts/alice")
	b, _ := sqlfence.New(table, "r-bob", "accounts/bob")
	tx1, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback()
	if err := a.Admit(ctx, tx1, fencetest.MultiTok("accounts/alice", 5)); err != nil {
		t.Fatal(err)
	}
	tx2, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Rollback()
	done := make(chan error, 1)
	go func() {
		done <- sqlfence.AdmitAll(ctx, tx2, fencetest.MultiToks(6, "accounts/alice", "accounts/bob"), b, a)
	}()
	waitBlocked(t, ctx, db)
	if err := b.Admit(ctx, tx1, fencetest.MultiTok("accounts/bob", 5)); err != nil {
		t.Fatalf("bob's row after AdmitAll(bob, alice) started waiting: %v", err)
	}
	if err := tx1.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("AdmitAll 6 after 5 committed: %v", err)
	}
	if err := tx2.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []*sqlfence.Fence{a, b} {
		if n, err := f.Newest(ctx, db); err != nil || n.Seq != 6 {
			t.Errorf("%s: newest %v, %v", f.Resource(), n, err)
		}
	}
}
