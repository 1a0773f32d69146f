package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
)

// DefaultTable is a conventional name for the fence table.
const DefaultTable = "distlock_fence"

// MaxResourceLen is the longest resource name New accepts, in bytes.
const MaxResourceLen = 1024

// Querier runs statements: *sql.Tx, *sql.Conn and *sql.DB satisfy it.
// Admit must be given the transaction of the fenced write.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Placeholder is the form of the statements' bind parameters.
type Placeholder int

const (
	// Dollar writes $1, $2, ...: PostgreSQL's form, required by the pgx
	// driver, and accepted (bound by position) by modernc.org/sqlite.
	Dollar Placeholder = iota
	// Question writes ?, for drivers that accept only that form.
	Question
)

// Option configures a Fence.
type Option func(*Fence)

// WithPlaceholder sets the form of bind parameters (default Dollar).
func WithPlaceholder(p Placeholder) Option { return func(f *Fence) { f.ph = p } }

// Fence admits the tokens of one lock for one resource, keeping the newest
// one in a row of a fence table. It holds no connection and is safe for
// concurrent use.
type Fence struct {
	table    string
	resource string
	lock     string
	ph       Placeholder

	upsert, read, schema string
}

// New returns a fence for resource, guarded by the lock called lock, whose
// newest token is kept in table. table must be a plain lower-case SQL
// identifier; see the package documentation for the limits.
func New(table, resource, lock string, opts ...Option) (*Fence, error) {
	if err := validateTable(table); err != nil {
		return nil, fmt.Errorf("sqlfence: new fence: %w", err)
	}
	if err := validateResource(resource); err != nil {
		return nil, fmt.Errorf("sqlfence: new fence: %w", err)
	}
	if err := distlock.ValidateName(lock); err != nil {
		return nil, fmt.Errorf("sqlfence: new fence: %w", err)
	}
	f := &Fence{table: table, resource: resource, lock: lock}
	for _, o := range opts {
		o(f)
	}
	if f.ph != Dollar && f.ph != Question {
		return nil, fmt.Errorf("sqlfence: new fence: unknown placeholder form %d", f.ph)
	}
	q := `"` + table + `"`
	p := func(n int) string {
		if f.ph == Question {
			return "?"
		}
		return fmt.Sprintf("$%d", n)
	}
	f.upsert = "INSERT INTO " + q + " (resource, lock_name, seq) VALUES (" + p(1) + ", " + p(2) + ", " + p(3) + ")" +
		" ON CONFLICT (resource) DO UPDATE SET seq = excluded.seq" +
		" WHERE " + q + ".lock_name = excluded.lock_name AND " + q + ".seq <= excluded.seq"
	f.read = "SELECT lock_name, seq FROM " + q + " WHERE resource = " + p(1)
	f.schema = "CREATE TABLE IF NOT EXISTS " + q + " (resource TEXT PRIMARY KEY, lock_name TEXT NOT NULL, seq BIGINT NOT NULL)"
	return f, nil
}

// validateTable accepts [a-z_][a-z0-9_]* of at most 63 bytes
// (PostgreSQL's identifier limit).
func validateTable(s string) error {
	if s == "" || len(s) > 63 {
		return fmt.Errorf("table name %q: want 1 to 63 characters", s)
	}
	for i, c := range []byte(s) {
		ok := c == '_' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9'
		if !ok {
			return fmt.Errorf("table name %q: want a plain lower-case SQL identifier ([a-z_][a-z0-9_]*)", s)
		}
	}
	return nil
}

func validateResource(s string) error {
	switch {
	case s == "":
		return errors.New("empty resource name")
	case len(s) > MaxResourceLen:
		return fmt.Errorf("resource name of %d bytes, more than %d", len(s), MaxResourceLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("resource name %q is not valid UTF-8", s)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("resource name %q holds a NUL byte", s)
	}
	return nil
}

// Table returns the fence table's name.
func (f *Fence) Table() string { return f.table }

// Resource returns the name of the resource the fence guards.
func (f *Fence) Resource() string { return f.resource }

// Lock returns the name of the lock whose tokens the fence admits.
func (f *Fence) Lock() string { return f.lock }

// Schema returns the CREATE TABLE IF NOT EXISTS statement of the fence
// table, for migrations.
func (f *Fence) Schema() string { return f.schema }

// CreateTable creates the fence table if it does not exist. Run it once at
// setup: on PostgreSQL, concurrent CREATE TABLE IF NOT EXISTS of one table
// can fail with a unique violation.
func (f *Fence) CreateTable(ctx context.Context, q Querier) error {
	if _, err := q.ExecContext(ctx, f.schema); err != nil {
		return fmt.Errorf("sqlfence: create table %s: %w", f.table, err)
	}
	return nil
}

func (f *Fence) name() string { return fmt.Sprintf("sql fence %s/%q", f.table, f.resource) }

// Admit admits t in the transaction q, which must be the transaction of
// the fenced write: it records t as the resource's newest token unless a
// newer token of the lock was admitted (and committed) before, and then
// returns a *fencing.StaleError naming that token. A token of another lock
// is refused with fencing.ErrForeignToken, an invalid one with
// distlock.ErrInvalidToken. Other errors come from the database.
//
// The admission takes effect when q commits, and holds the resource's row
// (PostgreSQL) or the database's write lock (SQLite) until then: other
// Admits of the resource wait. A rollback undoes it. After a refusal the
// transaction is still usable, but on PostgreSQL the refusing upsert
// still holds the resource's row until the transaction ends: roll it back
// (or finish it) promptly, or other Admits of the resource wait for it.
func (f *Fence) Admit(ctx context.Context, q Querier, t distlock.Token) error {
	if err := fencing.Check(f.name(), f.lock, t); err != nil {
		return err
	}
	res, err := q.ExecContext(ctx, f.upsert, f.resource, f.lock, t.Seq)
	if err != nil {
		return fmt.Errorf("sqlfence: %s: admit %v: %w", f.name(), t, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlfence: %s: admit %v: rows affected: %w", f.name(), t, err)
	}
	if n == 1 {
		return nil
	}
	if n != 0 {
		return fmt.Errorf("sqlfence: %s: admit %v: the upsert affected %d rows; is resource the primary key of %s?", f.name(), t, n, f.table)
	}
	// Refused: read back why, in the same transaction (on PostgreSQL the
	// upsert holds the row, so this is the row that refused t).
	lock, seq, err := f.row(ctx, q)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("sqlfence: %s: admit %v: refused, and the row is gone", f.name(), t)
	case err != nil:
		return fmt.Errorf("sqlfence: %s: admit %v: refused; reading the stored token: %w", f.name(), t, err)
	case lock != f.lock:
		return fmt.Errorf("sqlfence: %s: %w: token %v, the table holds lock %q's token %d for the resource (delete or rewrite the row after renaming a lock)",
			f.name(), fencing.ErrForeignToken, t, lock, seq)
	}
	if err := fencing.Compare(f.name(), t, seq); err != nil {
		return err
	}
	// The stored token is not newer, yet the upsert refused: only a
	// concurrent change the transaction's isolation hides can do that.
	return fmt.Errorf("sqlfence: %s: admit %v: refused although the stored token is %d", f.name(), t, seq)
}

// Newest returns the newest token admitted for the resource as q sees it,
// or the zero Token if none was.
func (f *Fence) Newest(ctx context.Context, q Querier) (distlock.Token, error) {
	lock, seq, err := f.row(ctx, q)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return distlock.Token{}, nil
	case err != nil:
		return distlock.Token{}, fmt.Errorf("sqlfence: %s: read: %w", f.name(), err)
	}
	return distlock.Token{Name: lock, Seq: seq}, nil
}

func (f *Fence) row(ctx context.Context, q Querier) (lock string, seq int64, err error) {
	err = q.QueryRowContext(ctx, f.read, f.resource).Scan(&lock, &seq)
	return lock, seq, err
}

// In returns the fence as a fencing.Fence whose Admit runs in a short
// transaction of its own on db. Such an Admit fences no write by itself:
// it serves fencing.Middleware (to turn stale callers away before any
// work) and tests; a fenced write still needs Admit in its own
// transaction.
func (f *Fence) In(db *sql.DB) fencing.Fence { return dbFence{f: f, db: db} }

type dbFence struct {
	f  *Fence
	db *sql.DB
}

func (d dbFence) Admit(ctx context.Context, t distlock.Token) error {
	if err := fencing.Check(d.f.name(), d.f.lock, t); err != nil {
		return err
	}
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlfence: %s: begin: %w", d.f.name(), err)
	}
	if err := d.f.Admit(ctx, tx, t); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlfence: %s: admit %v: commit: %w", d.f.name(), t, err)
	}
	return nil
}
