package etcdlock

import (
	"cmp"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/qlock/etcdq"
	"github.com/distlock/distlock/recipe"
)

// NewAdmin returns the Admin of the locks under key prefix prefix
// (DefaultPrefix if empty) on cli; a nil cli is an error wrapping
// distlock.ErrNilClient, a prefix that does not end in "/" one wrapping
// distlock.ErrInvalidName (as WithPrefix). The client stays the caller's.
//
// A recipe.Admin reads and manages the locks under one key prefix of an etcd
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
func NewAdmin(cli *clientv3.Client, prefix string) (*recipe.Admin, error) {
	if cli == nil {
		return nil, fmt.Errorf("etcdlock: new admin: %w: *clientv3.Client is nil", distlock.ErrNilClient)
	}
	prefix = cmp.Or(prefix, DefaultPrefix)
	if err := checkPrefix(prefix); err != nil {
		return nil, fmt.Errorf("etcdlock: new admin: %w", err)
	}
	return qlock.Link.Admin(newAdmin(cli, prefix, "")).(*recipe.Admin), nil
}

func newAdmin(cli *clientv3.Client, prefix, holder string) *qlock.Admin {
	return qlock.NewAdmin(etcdq.AdminStore{ClientStore: etcdq.ClientStore{Client: cli, Prefix: prefix}}, holder)
}
