// Package sqlfence fences a resource kept in a SQL database (PostgreSQL or
// SQLite, through database/sql): the check of the fencing token runs
// inside the caller's own transaction, so the fence and the protected
// write commit — or roll back — together.
//
// # Use
//
//	f, _ := sqlfence.New("distlock_fence", "ledger/accounts", "ledger")
//	f.CreateTable(ctx, db) // once, at setup
//
//	tx, _ := db.BeginTx(ctx, nil)
//	defer tx.Rollback()
//	if err := f.Admit(ctx, tx, token); err != nil {
//		return err // errors.Is(err, fencing.ErrStale): a newer holder exists
//	}
//	tx.ExecContext(ctx, "UPDATE accounts SET ...") // the fenced write
//	return tx.Commit()
//
// The fenced write MUST go through the same transaction as Admit. Commit
// is what makes both happen: the admission and the write become visible
// atomically, and a rollback (an error, a crash, a lost connection) undoes
// both — the token is then not admitted, and an older token is not
// refused because of it. An Admit through a *sql.DB, or in a transaction
// other than the write's, fences nothing.
//
// # Design
//
// The fence table holds one row per resource, the newest token admitted
// for it:
//
//	CREATE TABLE IF NOT EXISTS distlock_fence (
//		resource  TEXT PRIMARY KEY,
//		lock_name TEXT NOT NULL,
//		seq       BIGINT NOT NULL,
//		owner_id  BIGINT NOT NULL DEFAULT 0
//	)
//
// (Fence.Schema returns it for a given table name; Fence.CreateTable runs
// it.) Many resources, guarded by many locks, share one table. owner_id is
// the token's Owner (the etcd lease or ZooKeeper session that acquired,
// see distlock.Token), its 64 bits stored as a signed BIGINT.
//
// Admit first applies fencing.Check (invalid tokens and tokens of another
// lock are refused without touching the database), then runs ONE
// statement, a conditional upsert:
//
//	INSERT INTO distlock_fence (resource, lock_name, seq, owner_id) VALUES ($1, $2, $3, $4)
//	ON CONFLICT (resource) DO UPDATE SET seq = excluded.seq, owner_id = excluded.owner_id
//	WHERE distlock_fence.lock_name = excluded.lock_name
//	  AND (distlock_fence.seq < excluded.seq
//	    OR distlock_fence.seq = excluded.seq AND distlock_fence.owner_id = excluded.owner_id)
//
// Its affected-row count decides: 1 means admitted (a first token, a newer
// one, or the newest one again — the same acquisition's token is admitted
// so a holder can retry); 0 means refused. Only on refusal is the stored
// row read back (in the same transaction) to name the newer token in the
// *fencing.StaleError, the other acquisition with the same sequence number
// in the *fencing.ForkError (a cluster rebuilt, or restored from a backup,
// issued the number twice), or to report that the row belongs to another
// lock (an error wrapping fencing.ErrForeignToken).
//
// # Several locks
//
// A holder of several locks at once (one token per lock) fences its write
// with AdmitAll, in the write's transaction:
//
//	if err := sqlfence.AdmitAll(ctx, tx, lease.Tokens(), aliceFence, bobFence); err != nil {
//		return err // one stale token refuses all: roll back
//	}
//
// Each fence admits the token of its lock, as Admit does, and the first
// refusal ends it; the rollback undoes the admissions before it. AdmitAll
// takes the fences' rows in one order, by table and resource, whatever
// order the fences are given in, so two transactions fencing overlapping
// resources wait for each other on PostgreSQL instead of deadlocking
// (Admits of several fences made one by one, in varying orders, can).
//
// # Migrating a table of an earlier version
//
// Tables created before tokens named their owner lack owner_id, and
// CreateTable (IF NOT EXISTS) leaves them so: Admit then fails with the
// database's "no such column" error — it never admits. Run Fence.Migrate
// once (or the statement Fence.Migration returns, in your migration tool):
//
//	ALTER TABLE distlock_fence ADD COLUMN owner_id BIGINT NOT NULL DEFAULT 0
//
// Existing rows get owner 0, "owner unknown": they keep refusing older
// tokens and admitting newer ones, and a token with a row's own sequence
// number is refused as a fork (it may or may not be the acquisition
// admitted before the upgrade; refusing is the safe side). A holder still
// working with that number when the upgrade happens acquires again.
//
// Why this is atomic:
//
//   - PostgreSQL: the upsert locks the resource's row (also when the WHERE
//     is false) until the transaction ends, so concurrent fencers of one
//     resource are serialized: a second Admit waits for the first
//     transaction to commit or roll back. Under READ COMMITTED (the
//     default) the waiting upsert then re-checks the WHERE against the
//     newly committed row, so a token older than a just-committed one is
//     refused, and a newer one is admitted. Under REPEATABLE READ or
//     SERIALIZABLE the waiting transaction fails with a serialization
//     error (SQLSTATE 40001) instead, which the caller retries as usual.
//     The row is locked even when the upsert refuses the token, so a
//     refused transaction must end promptly (roll it back) to let others
//     on. Two first-ever inserts for one resource race on the primary key;
//     ON CONFLICT turns the loser into the update path after waiting.
//   - SQLite (3.24 or later for upsert): there is one writer at a time;
//     the upsert takes the database's write lock and holds it until the
//     transaction ends. Set a busy timeout (e.g. modernc.org/sqlite's
//     "_pragma=busy_timeout(10000)") so a concurrent writer waits instead
//     of failing with SQLITE_BUSY, and prefer immediate transactions
//     ("_txlock=immediate") when the transaction reads before it writes,
//     so it cannot fail to upgrade its read lock.
//
// Holding the row (or SQLite's write lock) until commit is the price of
// fencing inside a transaction: keep fenced transactions short, and call
// Admit early in them so the fenced write and everything after it run
// with the fence held.
//
// # Placeholders
//
// The statements use $1, $2, $3, $4 by default: the pgx stdlib driver
// (github.com/jackc/pgx/v5/stdlib) requires that form, and
// modernc.org/sqlite binds $NNN by position too. For a driver that takes
// only ?, pass WithPlaceholder(Question); each argument is used once, so
// the two forms bind alike.
//
// # Identifiers and limits
//
// The table name must be a plain lower-case SQL identifier
// ([a-z_][a-z0-9_]*, at most 63 bytes); it is written double-quoted, and
// lower case makes the quoted and unquoted spellings name the same table
// on both databases. The resource is any non-empty UTF-8 text without NUL
// (PostgreSQL's TEXT cannot hold NUL) of at most 1024 bytes; the lock
// name must pass distlock.ValidateName.
//
// A row records the lock that guards the resource. Renaming that lock
// (e.g. moving to "ledger/g2" after rebuilding a cluster, see
// distlock.Token) leaves the row refusing the new lock's tokens with
// fencing.ErrForeignToken until an operator deletes the row or rewrites
// it: UPDATE distlock_fence SET lock_name = 'ledger/g2', seq = 0,
// owner_id = 0 WHERE resource = '...'.
//
// # Outside a transaction
//
// Fence.In(db) adapts a fence to the fencing.Fence interface by admitting
// in a short transaction of its own, for fencing.Middleware (which then
// only turns stale callers away early; the handler must still Admit inside
// its write transaction) and for the shared contract suite.
package sqlfence
