package etcdlock

import (
	"context"
	"fmt"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/qlock/etcdq"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Revoke asks the holders of lock name (under key prefix prefix,
// DefaultPrefix if empty: a
// Mutex's or writer's holder, every reader holding, every permit of a
// semaphore) to let go, in two phases: it records a revocation per holder
// beside the lock,
//
//	PREFIX@revoke/NAME/@req/TOKEN   (JSON, see distlock.Revocation)
//
// which revocable holders (WithRevocable) see as their Lease's Done
// closing with a *distlock.RevokedError; it waits until they release or
// r.Grace is over; then, with r.Force, deletes the entries of those still
// there, each only if it is still that holder's (its create revision). A
// forced holder sees distlock.ErrEntryGone, and its successor's larger
// token makes fences refuse what it writes late.
//
// It returns each holder's record with its outcome (distlock.RevokeReleased,
// RevokeForced, RevokeStillHeld); none, and no error, when the lock is
// free. A holder revoked already is not asked again: its record is
// returned with Again set, and forced (r.Force) once its first grace
// period or r.Grace is over, whichever ends first. Records are kept,
// not bound to any lease, as the audit trail: the newest qlock.RevokeKeep (100) per lock.
func Revoke(ctx context.Context, cli *clientv3.Client, prefix, name string, r distlock.RevokeRequest) ([]distlock.Revocation, error) {
	if cli == nil {
		return nil, fmt.Errorf("etcdlock: revoke %q: %w: *clientv3.Client is nil", name, distlock.ErrNilClient)
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return qlock.Revoke(ctx, etcdq.RevokeStore{Client: cli, Prefix: prefix}, name, r)
}

// Revocations returns lock name's revocation records (under key prefix
// prefix), in the order they were requested: pending ones and past ones.
// A pending record whose holder is gone, its revoker having stopped
// before it recorded the outcome, says distlock.RevokeEnded.
func Revocations(ctx context.Context, cli *clientv3.Client, prefix, name string) ([]distlock.Revocation, error) {
	if cli == nil {
		return nil, fmt.Errorf("etcdlock: revocations of %q: %w: *clientv3.Client is nil", name, distlock.ErrNilClient)
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return qlock.Revocations(ctx, etcdq.RevokeStore{Client: cli, Prefix: prefix}, name)
}
