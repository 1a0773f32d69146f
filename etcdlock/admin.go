package etcdlock

import (
	"cmp"
	"fmt"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/qlock/etcdq"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Admin reads and manages the locks under one key prefix of an etcd
// client without holding any: their queues (Inspect, WatchQueue),
// revocations of their holders (Revoke, Revocations) and the done-markers
// of their slots (Marks). What it keeps beside a lock's queue
// (PREFIX + NAME + "/@"), never under it, so that the queue's range reads
// do not see it ('@' never occurs in lock names or slots, so lock "a"'s
// keys and lock "a/b"'s never mix):
//
//	PREFIX@revoke/NAME/@req/TOKEN   a holder's revocation record (JSON, see distlock.Revocation)
//	PREFIX@once/NAME/@slot/SLOT     a slot's done-marker (JSON, see distlock.SlotMarker)
//	PREFIX@once/NAME/@fence         the fence the markers are written through
//
// An Admin is safe for concurrent use.
type Admin struct{ q *qlock.Admin }

// NewAdmin returns the Admin of the locks under key prefix prefix
// (DefaultPrefix if empty) on cli; a nil cli is an error wrapping
// distlock.ErrNilClient, a prefix that does not end in "/" one wrapping
// distlock.ErrInvalidName (as WithPrefix). The client stays the caller's.
func NewAdmin(cli *clientv3.Client, prefix string) (*Admin, error) {
	if cli == nil {
		return nil, fmt.Errorf("etcdlock: new admin: %w: *clientv3.Client is nil", distlock.ErrNilClient)
	}
	prefix = cmp.Or(prefix, DefaultPrefix)
	if err := checkPrefix(prefix); err != nil {
		return nil, fmt.Errorf("etcdlock: new admin: %w", err)
	}
	return &Admin{newAdmin(cli, prefix, "")}, nil
}

func newAdmin(cli *clientv3.Client, prefix, holder string) *qlock.Admin {
	return qlock.NewAdmin(etcdq.AdminStore{RevokeStore: etcdq.RevokeStore{Client: cli, Prefix: prefix}}, holder)
}

// Marks keeps the done-markers of one lock's slots for distlock.Once, in
// etcd beside the lock's queue (see Admin), not bound to any lease: they
// outlive the session that wrote them. A Marks is safe for concurrent
// use.
type Marks struct{ q *qlock.Marks }

// NewMarks returns the done-markers of the locks s takes called name: on
// s's client, under s's prefix, with s's holder value as a marker's
// default Holder. A job holds its lock through a Session, so it needs no
// Admin for its markers; Admin.Marks is for tools that hold nothing.
func NewMarks(s *Session, name string) (*Marks, error) {
	if s == nil {
		return nil, fmt.Errorf("etcdlock: new marks %q: %w: *Session is nil", name, distlock.ErrNilClient)
	}
	return (&Admin{newAdmin(s.Client(), s.Prefix(), s.Holder())}).Marks(name)
}
