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
	// ExecContext runs a statement that returns no rows, as
	// (*sql.Tx).ExecContext does.
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	// QueryRowContext runs a query that returns at most one row, as
	// (*sql.Tx).QueryRowContext does.
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
	tel      []fencing.Option // until New makes telemetry of them
	obs      *fencing.Telemetry

	upsert, read, schema, migration, probe string
}

// WithTelemetry says where the fence counts its decisions and traces its
// refusals (fencing.WithMeterProvider, fencing.WithTracerProvider);
// default: OpenTelemetry's global providers.
func WithTelemetry(opts ...fencing.Option) Option {
	return func(f *Fence) { f.tel = append(f.tel, opts...) }
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
		return nil, fmt.Errorf("sqlfence: new fence: %w: unknown placeholder form %d", fencing.ErrInvalidArgument, f.ph)
	}
	f.obs, f.tel = fencing.NewTelemetry("sql", lock, f.tel...), nil
	q := `"` + table + `"`
	p := func(n int) string {
		if f.ph == Question {
			return "?"
		}
		return fmt.Sprintf("$%d", n)
	}
	f.upsert = "INSERT INTO " + q + " (resource, lock_name, seq, owner_id) VALUES (" + p(1) + ", " + p(2) + ", " + p(3) + ", " + p(4) + ")" +
		" ON CONFLICT (resource) DO UPDATE SET seq = excluded.seq, owner_id = excluded.owner_id" +
		" WHERE " + q + ".lock_name = excluded.lock_name AND (" + q + ".seq < excluded.seq OR " +
		q + ".seq = excluded.seq AND " + q + ".owner_id = excluded.owner_id)"
	f.read = "SELECT lock_name, seq, owner_id FROM " + q + " WHERE resource = " + p(1)
	f.schema = "CREATE TABLE IF NOT EXISTS " + q + " (resource TEXT PRIMARY KEY, lock_name TEXT NOT NULL, seq BIGINT NOT NULL, owner_id BIGINT NOT NULL DEFAULT 0)"
	f.migration = "ALTER TABLE " + q + " ADD COLUMN owner_id BIGINT NOT NULL DEFAULT 0"
	f.probe = "SELECT owner_id FROM " + q + " WHERE 1 = 0"
	return f, nil
}

// validateTable accepts [a-z_][a-z0-9_]* of at most 63 bytes
// (PostgreSQL's identifier limit).
func validateTable(s string) error {
	if s == "" || len(s) > 63 {
		return fmt.Errorf("%w: table name %q: want 1 to 63 characters", fencing.ErrInvalidArgument, s)
	}
	for i, c := range []byte(s) {
		ok := c == '_' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9'
		if !ok {
			return fmt.Errorf("%w: table name %q: want a plain lower-case SQL identifier ([a-z_][a-z0-9_]*)", fencing.ErrInvalidArgument, s)
		}
	}
	return nil
}

func validateResource(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty resource name", fencing.ErrInvalidArgument)
	case len(s) > MaxResourceLen:
		return fmt.Errorf("%w: resource name of %d bytes, more than %d", fencing.ErrInvalidArgument, len(s), MaxResourceLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: resource name %q is not valid UTF-8", fencing.ErrInvalidArgument, s)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%w: resource name %q holds a NUL byte", fencing.ErrInvalidArgument, s)
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

// Migration returns the statement that brings a fence table created by a
// version before tokens named their owner (without the owner_id column) to
// the current schema: ALTER TABLE ... ADD COLUMN owner_id BIGINT NOT NULL
// DEFAULT 0. Rows it leaves with owner 0 keep refusing older tokens and
// admitting newer ones; a token with a row's own sequence number is
// refused as a fork, since the owner that number was admitted for is not
// known. See also Migrate.
func (f *Fence) Migration() string { return f.migration }

// Migrate adds the owner_id column to a fence table created by a version
// before tokens named their owner, if it lacks it (see Migration); on a
// current table it changes nothing. Run it once at setup, before fencing,
// on the *sql.DB (not inside a transaction: on PostgreSQL the probe for
// the column aborts a transaction when the column is missing).
func (f *Fence) Migrate(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, f.probe)
	if err == nil {
		rows.Close()
		return nil
	}
	if _, err2 := db.ExecContext(ctx, f.migration); err2 != nil {
		return fmt.Errorf("sqlfence: migrate table %s: %w (probing for column owner_id: %v)", f.table, err2, err)
	}
	return nil
}

// CreateTable creates the fence table if it does not exist. Run it once at
// setup: on PostgreSQL, concurrent CREATE TABLE IF NOT EXISTS of one table
// can fail with a unique violation. It does not change an existing table:
// one created by an earlier version needs Migrate.
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
// returns a *fencing.StaleError naming that token, or another acquisition
// with t's sequence number was, and then returns a *fencing.ForkError. A token of another lock
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
	err := f.admit(ctx, q, t)
	f.obs.Record(ctx, t, err)
	return err
}

// admit is Admit's check and upsert.
func (f *Fence) admit(ctx context.Context, q Querier, t distlock.Token) error {
	if err := fencing.Check(f.name(), f.lock, t); err != nil {
		return err
	}
	res, err := q.ExecContext(ctx, f.upsert, f.resource, f.lock, t.Seq, int64(t.Owner))
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
	lock, stored, err := f.row(ctx, q)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("sqlfence: %s: admit %v: refused, and the row is gone", f.name(), t)
	case err != nil:
		return fmt.Errorf("sqlfence: %s: admit %v: refused; reading the stored token: %w", f.name(), t, err)
	case lock != f.lock:
		return fmt.Errorf("sqlfence: %s: %w: token %v, the table holds lock %q's token %d for the resource (delete or rewrite the row after renaming a lock)",
			f.name(), fencing.ErrForeignToken, t, lock, stored.Seq)
	}
	if err := fencing.Compare(f.name(), t, stored); err != nil {
		return err
	}
	// The stored token admits t, yet the upsert refused: only a
	// concurrent change the transaction's isolation hides can do that.
	return fmt.Errorf("sqlfence: %s: admit %v: refused although the stored token is %v", f.name(), t, stored)
}

// Newest returns the newest token admitted for the resource as q sees it,
// or the zero Token if none was.
func (f *Fence) Newest(ctx context.Context, q Querier) (distlock.Token, error) {
	_, stored, err := f.row(ctx, q)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return distlock.Token{}, nil
	case err != nil:
		return distlock.Token{}, fmt.Errorf("sqlfence: %s: read: %w", f.name(), err)
	}
	return stored, nil
}

// row reads the resource's row: the lock it records, and the stored token
// (Owner 0 for a row admitted before tokens named their owner).
func (f *Fence) row(ctx context.Context, q Querier) (lock string, t distlock.Token, err error) {
	var owner int64
	err = q.QueryRowContext(ctx, f.read, f.resource).Scan(&lock, &t.Seq, &owner)
	t.Name, t.Owner = lock, uint64(owner)
	return lock, t, err
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
		d.f.obs.Record(ctx, t, err)
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
