// Package zkfence is a fencing.Fence whose newest admitted token for one
// resource lives in ZooKeeper, in the data of one znode, so that the check
// and the resource's own writes can be one multi-op transaction.
//
// Write reads the fence node (its data and version), refuses a token older
// than the stored one with a *fencing.StaleError and one with the stored
// sequence number but another owner (two acquisitions a rebuilt or
// restored ensemble issued with one czxid, see distlock.Token) with a
// *fencing.ForkError, and otherwise commits one
// multi: a version-checked set of the node's data (or its creation, when it
// does not exist yet) together with the caller's operations. Either all of
// them are applied or none. If another writer changed the node in between,
// the version check (or the creation) fails, nothing is applied, and Write
// reads the node again and decides again; an equal token, a retry by the
// same holder, is admitted again.
//
// WriteAll is Write across several fences, for a holder of several locks
// at once: it reads every fence node, and if each fence admits the token
// of its lock, one multi sets (or creates) every node under its version
// read together with the caller's operations; one refusal refuses all of
// it. A lost race with any writer of the nodes fails the multi and
// WriteAll reads and decides again. The fences share one connection.
//
// The read may be served by a follower that lags behind the leader, but
// that cannot admit a stale or forked token: stored sequence numbers only
// grow, so a lagging read can only show an older token than the real one
// (or the real one), and then the multi,
// which the leader orders against every other write, fails its version
// check. Only the leader's decision on the multi lets a write through, so
// the fencing rule holds as if the read had been linearizable; a refusal
// is always right too, since the token it names was admitted. Newest syncs
// before it reads.
//
// The go-zookeeper client's calls block and take no context; this package
// runs them so that a Write, Admit or Newest returns as soon as its context
// ends (the call itself then completes or fails in the background, and
// whether a multi in flight was applied is unknown, as after any lost
// reply). Missing parents of the fence node are created as persistent
// nodes with no data; a fence node that exists with no data (a parent of
// another fence's node, or one an operator made) holds no token yet, so
// fences may nest.
//
// The node's data is the token's text after the lock's name and '@':
// "1042.100017d2c5a0000" (czxid in decimal, session ID in hex). Data of a
// decimal number alone was stored by a version before tokens named their
// owner: it still refuses older tokens and admits newer ones, and refuses
// a token with its own number as a fork (its owner is unknown), so
// upgrading needs no migration. The node must be written only through this
// package; deleting it makes the fence forget, and any token is admitted
// again.
package zkfence
