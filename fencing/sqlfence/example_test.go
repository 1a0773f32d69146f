package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/fencing/sqlfence"

	_ "github.com/jackc/pgx/v5/stdlib" // the PostgreSQL driver "pgx"
)

// These examples connect to PostgreSQL on localhost:5432; in this
// package's tests, TestMain (example_server_test.go) serves that address
// with a real server, whose superuser "postgres" needs no password.

// Example fences writes to a balances table with the tokens of the lock
// "ledger": the token is admitted inside the transaction of the write, so
// the two commit together. On SQLite (driver "sqlite") the code is the
// same.
func Example() {
	db, err := sql.Open("pgx", "postgres://postgres@localhost:5432/postgres?sslmode=disable")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()

	fence, err := sqlfence.New(sqlfence.DefaultTable, "balances", "ledger")
	if err != nil {
		log.Fatal(err)
	}
	// Once, at setup (or put fence.Schema() in a migration).
	if err := fence.CreateTable(ctx, db); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE balances (id TEXT PRIMARY KEY, balance BIGINT NOT NULL)`); err != nil {
		log.Fatal(err)
	}

	// deposit is what a lock holder runs with the token of its lock.
	deposit := func(token distlock.Token, id string, amount int64) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // a no-op after Commit; undoes the admission otherwise
		// First the fence, in the write's own transaction...
		if err := fence.Admit(ctx, tx, token); err != nil {
			return err
		}
		// ...then the write, in the same transaction...
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO balances (id, balance) VALUES ($1, $2)
			 ON CONFLICT (id) DO UPDATE SET balance = balances.balance + excluded.balance`,
			id, amount); err != nil {
			return err
		}
		// ...and the commit makes both happen, or neither.
		return tx.Commit()
	}

	fmt.Println(deposit(distlock.Token{Name: "ledger", Seq: 41, Owner: 0x694d7f0c8a1b2c3d}, "alice", 100))
	// A newer holder took over.
	fmt.Println(deposit(distlock.Token{Name: "ledger", Seq: 42, Owner: 0x694d7f0c8a1b2d01}, "alice", 5))
	// The old holder wakes up from a pause and tries again: refused.
	err = deposit(distlock.Token{Name: "ledger", Seq: 41, Owner: 0x694d7f0c8a1b2c3d}, "alice", 100)
	var stale *fencing.StaleError
	fmt.Println(errors.Is(err, fencing.ErrStale), errors.As(err, &stale) && stale.Newest.Seq == 42)

	var balance int64
	if err := db.QueryRowContext(ctx, `SELECT balance FROM balances WHERE id = 'alice'`).Scan(&balance); err != nil {
		log.Fatal(err)
	}
	fmt.Println("balance:", balance)
	// Output:
	// <nil>
	// <nil>
	// true true
	// balance: 105
}

// A holder of two locks at once ("accounts/alice" and "accounts/bob", one
// acquisition, one token per name) moves money between two accounts, each
// fenced by its own lock: AdmitAll admits both tokens in the transfer's
// transaction, and a stale token for either refuses it whole.
func ExampleAdmitAll() {
	db, err := sql.Open("pgx", "postgres://postgres@localhost:5432/postgres?sslmode=disable")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()

	alice, _ := sqlfence.New(sqlfence.DefaultTable, "accounts/alice", "accounts/alice")
	bob, _ := sqlfence.New(sqlfence.DefaultTable, "accounts/bob", "accounts/bob")
	if err := alice.CreateTable(ctx, db); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE accounts (id TEXT PRIMARY KEY, balance BIGINT NOT NULL);
		INSERT INTO accounts VALUES ('alice', 100), ('bob', 0)`); err != nil {
		log.Fatal(err)
	}

	transfer := func(tokens []distlock.Token, amount int64) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := sqlfence.AdmitAll(ctx, tx, tokens, alice, bob); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance - $1 WHERE id = 'alice'`, amount); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance + $1 WHERE id = 'bob'`, amount); err != nil {
			return err
		}
		return tx.Commit()
	}

	// The multi-lock lease's tokens: one per name, one Seq and Owner.
	holder := []distlock.Token{
		{Name: "accounts/alice", Seq: 1042, Owner: 0x694d7f0c8a1b2c3d},
		{Name: "accounts/bob", Seq: 1042, Owner: 0x694d7f0c8a1b2c3d},
	}
	fmt.Println(transfer(holder, 30))
	// Meanwhile a newer holder of bob's lock alone wrote.
	fmt.Println(bob.In(db).Admit(ctx, distlock.Token{Name: "accounts/bob", Seq: 1050, Owner: 0x694d80a3e1f00011}))
	// The paused multi-lock holder retries: refused whole.
	err = transfer(holder, 30)
	var stale *fencing.StaleError
	fmt.Println(errors.As(err, &stale), stale.Resource)

	var a, b int64
	if err := db.QueryRowContext(ctx, `SELECT (SELECT balance FROM accounts WHERE id = 'alice'), (SELECT balance FROM accounts WHERE id = 'bob')`).Scan(&a, &b); err != nil {
		log.Fatal(err)
	}
	fmt.Println("alice:", a, "bob:", b)
	// Output:
	// <nil>
	// <nil>
	// true sql fence distlock_fence/"accounts/bob"
	// alice: 70 bob: 30
}
