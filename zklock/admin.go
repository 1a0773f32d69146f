package zklock

import (
	"cmp"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/qlock/zkq"
	"github.com/distlock/distlock/recipe"
)

// NewAdmin returns the Admin of the locks under znode prefix prefix
// (DefaultPrefix if empty) on conn, whose znodes get acl (none given:
// zk.WorldACL(zk.PermAll)); a nil conn is an error wrapping
// distlock.ErrNilClient, and a prefix that is not an absolute path
// without a trailing "/" an error too. The connection stays the caller's.
//
// A recipe.Admin reads and manages the locks under one znode prefix of a
// ZooKeeper connection without holding any: their queues (Inspect,
// WatchQueue), revocations of their holders (Revoke, Revocations) and the
// done-markers of their slots (Marks). What it keeps are persistent
// znodes beside a lock's directory (PREFIX/NAME), never in it ('@' never
// occurs in lock names or slots, so lock "a"'s znodes and lock "a/b"'s
// never mix):
//
//	PREFIX/@revoke/NAME/@req          the bell: its data is set after each new record, for revocable holders to watch
//	PREFIX/@revoke/NAME/@req/TOKEN    a holder's revocation record (JSON, see distlock.Revocation)
//	PREFIX/@once/NAME/@slot/SLOT      a slot's done-marker (JSON, see distlock.SlotMarker)
//	PREFIX/@once/NAME/@fence          the fence the markers are written through
func NewAdmin(conn *zk.Conn, prefix string, acl ...zk.ACL) (*recipe.Admin, error) {
	if conn == nil {
		return nil, fmt.Errorf("zklock: new admin: %w: *zk.Conn is nil", distlock.ErrNilClient)
	}
	prefix = cmp.Or(prefix, DefaultPrefix)
	if err := zkq.CheckPrefix(prefix); err != nil {
		return nil, fmt.Errorf("zklock: new admin: %w", err)
	}
	return qlock.Link.Admin(newAdmin(conn, prefix, acl, "")).(*recipe.Admin), nil
}

func newAdmin(conn *zk.Conn, prefix string, acl []zk.ACL, holder string) *qlock.Admin {
	return qlock.NewAdmin(zkq.AdminStore{ClientStore: zkq.ClientStore{Conn: conn, Prefix: prefix, ACL: acl}}, holder)
}
