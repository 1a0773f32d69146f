// Package etcdfence is a fencing.Fence whose newest admitted token for one
// resource lives in etcd, under one key, so that the check and the
// resource's own writes can be one etcd transaction.
//
// Write admits a token and applies the caller's operations in a single Txn
// (one round trip): the stored token and the operations are committed only
// if the stored token is older than the one presented, or is the same
// token (a retry by the same holder); otherwise nothing is written, and
// the *fencing.StaleError names the newer token, or the *fencing.ForkError
// the other acquisition with the same sequence number (see
// distlock.Token), read in the same Txn. Because etcd serializes transactions through Raft and answers
// them linearizably, the decision is atomic with the operations and no
// interleaving of writers, clients or members can admit an older token's
// operations after a newer token was admitted.
//
// WriteHeld adds a second condition to the same Txn: the writer's lock key
// must still exist with the create revision and the lease the token
// carries (an etcd lock's token is its holder key's create revision and
// lease ID, see etcdlock). It
// refuses with ErrNotHeld once the key is gone, which stops a holder whose
// session expired even before any successor has written.
//
// WriteAll is Write across several fences, for a holder of several locks
// at once: one Txn puts every fence's new token and the caller's
// operations only if every fence admits the token of its lock. It is
// guarded by each fence key's mod revision as read, and a writer that
// loses a race reads the keys again (in the same Txn) and decides again,
// so the decision and the operations are one linearizable step as with
// Write. The fences share one client and stay within the server's limit
// on operations per Txn (128 by default) with the operations.
//
// The token is stored as its sequence number in 20 zero-padded decimal
// digits, '.', and its owner in 16 zero-padded lower-case hex digits
// ("00000000000000001042.694d7f0c8a1b2c3d"), so that etcd's byte-wise
// comparison of values orders sequence numbers numerically. A value of 20
// digits alone was stored by a version before tokens named their owner:
// it still refuses older tokens and admits newer ones, and refuses a token
// with its own number as a fork (its owner is unknown), so upgrading needs
// no migration; the holder of that number acquires again. The key must be
// written only through this package; deleting it makes the fence forget,
// and any token is admitted again.
package etcdfence
