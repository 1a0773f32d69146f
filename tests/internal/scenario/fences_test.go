package scenario_test

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/fencing/etcdfence"
	"github.com/distlock/distlock/fencing/sqlfence"
	"github.com/distlock/distlock/fencing/zkfence"
	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	_ "modernc.org/sqlite" // "sqlite"
)

// fenceBackends are the resource's fencing backends, one entry each. The
// ledger lives in the backend's store and each append is one atomic step
// with the fencing check there.
var fenceBackends = []fenceBackend{
	{
		name: "memory",
		new: func(_ context.Context, t *testing.T, _ *env, lock string) ledger {
			f, err := fencing.NewMemory(lock)
			if err != nil {
				t.Fatal(err)
			}
			return &memoryLedger{fence: f}
		},
	},
	{
		name: "etcdfence",
		new: func(_ context.Context, t *testing.T, env *env, lock string) ledger {
			f, err := etcdfence.New(env.etcdCli, "/scenario/fence/"+lock, lock)
			if err != nil {
				t.Fatal(err)
			}
			return &etcdLedger{fence: f, cli: env.etcdCli, prefix: "/scenario/ledger/" + lock + "/"}
		},
	},
	{
		name: "zkfence",
		new: func(_ context.Context, t *testing.T, env *env, lock string) ledger {
			dir := "/scenario/ledger/" + lock
			if err := zkMkdirs(env.zkConn, dir); err != nil {
				t.Fatal(err)
			}
			f, err := zkfence.New(env.zkConn, "/scenario/fence/"+lock, lock)
			if err != nil {
				t.Fatal(err)
			}
			return &zkLedger{fence: f, conn: env.zkConn, dir: dir}
		},
	},
	{
		name: "sqlfence-sqlite",
		new: func(ctx context.Context, t *testing.T, _ *env, lock string) ledger {
			dsn := "file:" + filepath.Join(t.TempDir(), "ledger.db") + "?_pragma=busy_timeout(20000)&_pragma=journal_mode(WAL)&_txlock=immediate"
			db, err := sql.Open("sqlite", dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return newSQLLedger(ctx, t, db, lock, "INTEGER PRIMARY KEY AUTOINCREMENT")
		},
	},
	{
		name: "sqlfence-postgres",
		new: func(ctx context.Context, t *testing.T, env *env, lock string) ledger {
			return newSQLLedger(ctx, t, env.postgres(t).DB(), lock, "BIGSERIAL PRIMARY KEY")
		},
	},
}

// etcdLedger keeps the entries under a prefix in etcd; an append is one
// etcdfence Write: the fence's check and the entry's put in one Txn.
type etcdLedger struct {
	fence  *etcdfence.Fence
	cli    *clientv3.Client
	prefix string
}

func (l *etcdLedger) append(ctx context.Context, tok distlock.Token, text string) error {
	key := fmt.Sprintf("%s%020d-%s", l.prefix, tok.Seq, randomHex())
	_, err := l.fence.Write(ctx, tok, clientv3.OpPut(key, string(encodeEntry(tok, text))))
	return err
}

func (l *etcdLedger) entries(ctx context.Context) ([]entry, error) {
	resp, err := l.cli.Get(ctx, l.prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	var es []entry
	for _, kv := range resp.Kvs {
		e, err := decodeEntry(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kv.Key, err)
		}
		es = append(es, e)
	}
	return es, nil
}

// zkLedger keeps the entries as sequential znodes; an append is one
// zkfence Write: the fence's check and the entry's create in one multi.
type zkLedger struct {
	fence *zkfence.Fence
	conn  *zk.Conn
	dir   string
}

func (l *zkLedger) append(ctx context.Context, tok distlock.Token, text string) error {
	_, err := l.fence.Write(ctx, tok, &zk.CreateRequest{Path: l.dir + "/e-", Data: encodeEntry(tok, text), Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagSequence})
	return err
}

func (l *zkLedger) entries(context.Context) ([]entry, error) {
	if _, err := l.conn.Sync(l.dir); err != nil {
		return nil, err
	}
	children, _, err := l.conn.Children(l.dir)
	if err != nil {
		return nil, err
	}
	sort.Strings(children) // e-<10-digit sequence>: commit order
	var es []entry
	for _, c := range children {
		b, _, err := l.conn.Get(l.dir + "/" + c)
		if err != nil {
			return nil, err
		}
		e, err := decodeEntry(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c, err)
		}
		es = append(es, e)
	}
	return es, nil
}

// zkMkdirs creates path and its parents as persistent nodes.
func zkMkdirs(conn *zk.Conn, path string) error {
	p := ""
	for _, part := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		p += "/" + part
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}

// sqlLedger keeps the entries in a table; an append is one transaction:
// sqlfence's Admit, then the insert.
type sqlLedger struct {
	fence *sqlfence.Fence
	db    *sql.DB
	table string
}

var sqlLedgers atomic.Int64

func newSQLLedger(ctx context.Context, t *testing.T, db *sql.DB, lock, idType string) *sqlLedger {
	t.Helper()
	f, err := sqlfence.New(sqlfence.DefaultTable, "ledger:"+lock, lock)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CreateTable(ctx, db); err != nil {
		t.Fatal(err)
	}
	l := &sqlLedger{fence: f, db: db, table: fmt.Sprintf("ledger_%d", sqlLedgers.Add(1))}
	if _, err := db.ExecContext(ctx, fmt.Sprintf("CREATE TABLE %s (id %s, token TEXT NOT NULL, text TEXT NOT NULL)", l.table, idType)); err != nil {
		t.Fatal(err)
	}
	return l
}

func (l *sqlLedger) append(ctx context.Context, tok distlock.Token, text string) error {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := l.fence.Admit(ctx, tx, tok); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (token, text) VALUES ($1, $2)", l.table), tok.String(), text); err != nil {
		return err
	}
	return tx.Commit()
}

func (l *sqlLedger) entries(ctx context.Context) ([]entry, error) {
	rows, err := l.db.QueryContext(ctx, fmt.Sprintf("SELECT token, text FROM %s ORDER BY id", l.table))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var es []entry
	for rows.Next() {
		var tok, text string
		if err := rows.Scan(&tok, &text); err != nil {
			return nil, err
		}
		t, err := distlock.ParseToken(tok)
		if err != nil {
			return nil, err
		}
		es = append(es, entry{t, text})
	}
	return es, rows.Err()
}

func randomHex() string {
	var b [8]byte
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return hex.EncodeToString(b[:])
}
