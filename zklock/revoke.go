package zklock

import (
	"context"
	"fmt"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/qlock/zkq"
	"github.com/go-zookeeper/zk"
)

// Revoke asks the holders of lock name (under prefix, DefaultPrefix if
// empty: a Mutex's or
// writer's holder, every reader holding, every permit of a semaphore) to
// let go, in two phases: it records a revocation per holder beside the
// lock, as a persistent znode with acl (nil: zk.WorldACL(zk.PermAll)),
//
//	PREFIX/@revoke/NAME/@req/TOKEN   (JSON, see distlock.Revocation)
//
// and sets the data of PREFIX/@revoke/NAME/@req, which revocable holders
// (WithRevocable) watch: they see their Lease's Done close with a
// *distlock.RevokedError. It waits until they release or r.Grace is over;
// then, with r.Force, deletes the znodes of those still there, each only
// if it is still that holder's (its czxid). A forced holder sees
// distlock.ErrEntryGone, and its successor's larger token makes fences
// refuse what it writes late.
//
// It returns each holder's record with its outcome (distlock.RevokeReleased,
// RevokeForced, RevokeStillHeld); none, and no error, when the lock is
// free. A holder revoked already is not asked again: its record is
// returned with Again set, and forced (r.Force) once its first grace
// period or r.Grace is over, whichever ends first. Records are kept as
// the audit trail: the newest qlock.RevokeKeep (100) per lock.
func Revoke(ctx context.Context, conn *zk.Conn, prefix, name string, r distlock.RevokeRequest, acl []zk.ACL) ([]distlock.Revocation, error) {
	if conn == nil {
		return nil, fmt.Errorf("zklock: revoke %q: %w: *zk.Conn is nil", name, distlock.ErrNilClient)
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := zkq.CheckPrefix(prefix); err != nil {
		return nil, fmt.Errorf("zklock: revoke %q: %w", name, err)
	}
	return qlock.Revoke(ctx, zkq.RevokeStore{Conn: conn, Prefix: prefix, ACL: acl}, name, r)
}

// Revocations returns lock name's revocation records (under prefix), in
// the order they were requested: pending ones and past ones. A pending
// record whose holder is gone, its revoker having stopped before it
// recorded the outcome, says distlock.RevokeEnded.
func Revocations(ctx context.Context, conn *zk.Conn, prefix, name string) ([]distlock.Revocation, error) {
	if conn == nil {
		return nil, fmt.Errorf("zklock: revocations of %q: %w: *zk.Conn is nil", name, distlock.ErrNilClient)
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := zkq.CheckPrefix(prefix); err != nil {
		return nil, fmt.Errorf("zklock: revocations of %q: %w", name, err)
	}
	return qlock.Revocations(ctx, zkq.RevokeStore{Conn: conn, Prefix: prefix}, name)
}
