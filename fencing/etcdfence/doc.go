// Package etcdfence is a fencing.Fence whose newest admitted token for one
// resource lives in etcd, under one key, so that the check and the
// resource's own writes can be one etcd transaction.
//
// Write admits a token and applies the caller's operations in a single Txn
// (one round trip): the stored token and the operations are committed only
// if the stored token is not newer than the one presented (an equal token,
// a retry by the same holder, is admitted again); otherwise nothing is
// written and the *fencing.StaleError names the newer token, read in the
// same Txn. Because etcd serializes transactions through Raft and answers
// them linearizably, the decision is atomic with the operations and no
// interleaving of writers, clients or members can admit an older token's
// operations after a newer token was admitted.
//
// WriteHeld adds a second condition to the same Txn: the writer's lock key
// must still exist with the create revision the token carries (an etcd
// lock's token is its holder key's create revision, see etcdlock). It
// refuses with ErrNotHeld once the key is gone, which stops a holder whose
// session expired even before any successor has written.
//
// The token is stored as its sequence number in 20 zero-padded decimal
// digits, so that etcd's byte-wise comparison of values orders tokens
// numerically. The key must be written only through this package; deleting
// it makes the fence forget, and any token is admitted again.
package etcdfence
