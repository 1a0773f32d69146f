// Package fencing makes the protected resource the final arbiter of a
// lock: a write carrying fencing token T for lock N is admitted only if no
// token newer than T for N was admitted before, and the check is atomic
// with the write it protects.
//
// A lock alone cannot promise mutual exclusion: a holder that pauses (GC,
// swap, SIGSTOP) past its TTL or session timeout wakes up still believing
// it holds the lock while a successor works. Its token is then older than
// the successor's, and a fence refuses it.
//
// The rule, the same for every backend:
//
//   - a token equal to the newest admitted one is admitted again (a retry
//     by the same holder);
//   - an older one is refused with a *StaleError (errors.Is ErrStale) that
//     names the refused token and the newer one seen;
//   - a token of another lock is refused with ErrForeignToken, and an
//     invalid one with distlock.ErrInvalidToken: a fence guards one lock's
//     resource, and fences of different resources never interfere.
//
// Memory (here) fences an in-process resource. The backends in the
// sub-packages keep the newest token where the resource lives and make the
// check part of the write: etcdfence (one Txn), zkfence (one multi-op),
// sqlfence (a conditional upsert inside the caller's transaction).
// Middleware and SetToken carry tokens over HTTP.
package fencing
