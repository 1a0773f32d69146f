// Package fencing makes the protected resource the final arbiter of a
// lock: a write carrying fencing token T for lock N is admitted only if no
// token newer than T for N was admitted before, nor another acquisition
// with T's sequence number, and the check is atomic with the write it
// protects.
//
// A lock alone cannot promise mutual exclusion: a holder that pauses (GC,
// swap, SIGSTOP) past its TTL or session timeout wakes up still believing
// it holds the lock while a successor works. Its token is then older than
// the successor's, and a fence refuses it.
//
// The rule, the same for every backend:
//
//   - a newer token than the newest admitted one is admitted;
//   - the newest admitted token itself (same sequence number, same owner)
//     is admitted again: a retry by the same holder;
//   - an older one is refused with a *StaleError (errors.Is ErrStale) that
//     names the refused token and the newer one seen;
//   - one with the newest admitted token's sequence number but another
//     owner is refused with a *ForkError (errors.Is ErrFork) naming both:
//     two acquisitions carry one number, which only a cluster rebuilt from
//     scratch or restored from a backup issues (see distlock.Token), and
//     the fence cannot tell which is current, so it keeps the one it saw
//     first — fail-safe;
//   - a token of another lock is refused with ErrForeignToken, and an
//     invalid one with distlock.ErrInvalidToken: a fence guards one lock's
//     resource, and fences of different resources never interfere.
//
// Memory (here) fences an in-process resource. The backends in the
// sub-packages keep the newest token where the resource lives and make the
// check part of the write: etcdfence (one Txn), zkfence (one multi-op),
// sqlfence (a conditional upsert inside the caller's transaction).
// Middleware and SetToken carry tokens over HTTP.
//
// A write protected by several locks at once (one acquisition of several
// names carries one token per name, all with one sequence number and
// owner) goes through every lock's fence in one atomic step: it is
// admitted only if each fence admits the token of its own lock, and one
// stale, forked or invalid token refuses all of it, with nothing recorded
// in any fence. DoAll does that for memory fences (taking their mutexes in
// one order, by lock name, so that concurrent DoAlls cannot deadlock); the
// sub-packages have WriteAll (etcdfence, zkfence) and AdmitAll (sqlfence).
// Match pairs fences with tokens by lock name, refusing with ErrUnmatched
// what does not pair up one to one; Refusals is the error of every fence
// that refused (a *RefusalsError, one line naming each, when several did).
//
// Arguments a fence cannot use, in this package and the sub-packages'
// constructors and writes (an empty etcd key, a znode path that is not
// absolute, a bad SQL table or resource name, a nil fence), are errors
// wrapping ErrInvalidArgument; a bad lock name wraps
// distlock.ErrInvalidName, a nil client distlock.ErrNilClient. They are
// found before any store is asked.
//
// The stores keep the owner beside the sequence number. A sequence number
// stored by a version before tokens named their owner reads as owner 0,
// "unknown": it orders tokens as before and refuses a token of its own
// number as a fork. Reason classifies refusals for logs and metrics.
package fencing
