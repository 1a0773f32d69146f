package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// abandonTimeout bounds the cleanup a failed Lock does before returning;
// if the delete has not gone through by then, it is retried in the
// background for as long as the session lives (after that the lease takes
// the key with it).
const abandonTimeout = time.Second

// enqueueAttempt bounds one attempt of a Lock's enqueue Txn: a quarter of
// the TTL, at least half a second.
func (s *Session) enqueueAttempt() time.Duration { return max(s.ttl/4, 500*time.Millisecond) }

// Entry-key kind markers: writers and readers live under different
// sub-prefixes of a lock's queue, so that a TryLock can ask "is there any
// writer?" with a single prefix compare. An Election's candidates have a
// marker of their own, sorting before both, so that an Election and a
// Mutex (or RWMutex) of the same name are separate queues: the lock
// entries are the key range from the readers' marker to the end of the
// writers' sub-prefix, which holds no candidate, and the candidates are
// the "e" sub-prefix, which holds no lock entry.
const (
	exclusiveMark = "w"
	sharedMark    = "r"
	electionMark  = "e"
)

// queueDir returns the prefix under which lock name keeps its entries.
func (s *Session) queueDir(name string) string { return s.prefix + name + "/@" }

func kindMark(k distlock.Kind) string {
	if k == distlock.Shared {
		return sharedMark
	}
	return exclusiveMark
}

// conflictRange returns the key range [key, end) of the entries a waiter
// of kind k must wait for: for a lock, every lock entry for an exclusive
// waiter, writers for a shared one; for an election's candidate (always
// exclusive), every candidate. Lock entries and candidates never conflict.
func conflictRange(dir string, k distlock.Kind, election bool) (key, end string) {
	switch {
	case election:
		key = dir + electionMark
	case k == distlock.Shared:
		key = dir + exclusiveMark
	default:
		// Readers and writers: from "r" to the end of "w…"; "e" sorts
		// before them.
		return dir + sharedMark, clientv3.GetPrefixRangeEnd(dir + exclusiveMark)
	}
	return key, clientv3.GetPrefixRangeEnd(key)
}

func entryKind(dir, key string) distlock.Kind {
	if strings.HasPrefix(key, dir+sharedMark) {
		return distlock.Shared
	}
	return distlock.Exclusive
}

// entry is one of this session's keys in a lock's queue.
type entry struct {
	s    *Session
	name string
	key  string
	rev  int64 // create revision: the fencing token once it holds
	// alive is cancelled when the key is deleted by anyone but its owner,
	// when the session ends, or when the owner releases it; the cause says
	// which.
	alive context.Context
	kill  context.CancelCauseFunc
	// waited says the entry had others ahead at enqueue: its holding rests
	// on their deletes, not on the enqueue's own answer.
	waited bool
	// election says the entry is an Election's candidate ("e" marker).
	election bool
}

// acquire is Lock and TryLock for both kinds of entries.
func (s *Session) acquire(ctx context.Context, name string, kind distlock.Kind, try bool) (*distlock.Lease, error) {
	e, err := s.acquireEntry(ctx, name, kind, false, try, "lock", s.holder)
	if err != nil {
		return nil, err
	}
	return e.hold(), nil
}

// acquireEntry is acquire for an entry whose value is value, reporting
// failures as op; it returns the held entry (an Election's leader needs its
// key to Proclaim). With election set the entry is an Election's candidate
// (kind must be Exclusive), queued among candidates only.
func (s *Session) acquireEntry(ctx context.Context, name string, kind distlock.Kind, election, try bool, op, value string) (*entry, error) {
	if try {
		op = "try" + op
	}
	fail := func(err error) error { return &distlock.LockError{Name: name, Op: op, Err: err} }
	if err := s.Err(); err != nil {
		return nil, fail(err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fail(context.Cause(ctx))
	}
	dir := s.queueDir(name)
	mark := kindMark(kind)
	if election {
		mark = electionMark
	}
	key := dir + mark + strconv.FormatInt(int64(s.id), 16) + "_" + strconv.FormatUint(s.seq.Add(1), 16)
	put := clientv3.OpPut(key, value, clientv3.WithLease(s.id))
	floor := s.maxRev.Load() // before the put is sent, see checkRev
	// The whole queue this entry joins: lock entries, or candidates.
	qkey, qend := conflictRange(dir, distlock.Exclusive, election)

	// ctxErr prefers ctx's cause to the store's error once ctx has ended:
	// a request bounded by ctx's deadline can come back with the server's
	// own timeout ("etcdserver: request timed out", the deadline having
	// travelled with the request) a moment before the client sees ctx end.
	ctxErr := func(err error) error {
		err = s.storeErr(err)
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return err
	}

	// Every enqueue Txn below is guarded (see guard): it writes only if
	// the session's guard is as last seen, and tells the guard's revision
	// in its Else branch when it is not.
	if try {
		ckey, cend := conflictRange(dir, kind, election)
		for {
			resp, err := s.client.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(ckey), "=", 0).WithRange(cend), s.guardIs(s.guardRev())).
				Then(put).
				Else(clientv3.OpGet(ckey, append(clientv3.WithFirstCreate(), clientv3.WithRange(cend))...), s.guardGet()).
				Commit()
			if err != nil {
				// The put may or may not have been applied, or be still
				// on its way.
				s.abandon(key)
				return nil, fail(ctxErr(err))
			}
			if !resp.Succeeded {
				if len(resp.Responses[0].GetResponseRange().Kvs) > 0 {
					return nil, fail(heldBy(resp))
				}
				// Free, but the guard moved: go again.
				s.sawGuardIn(resp.Responses[1].GetResponseRange(), resp.Header.Revision)
				continue
			}
			if err := s.checkRev(key, resp.Header.Revision, floor); err != nil {
				return nil, fail(err)
			}
			e := s.track(name, key, resp.Header.Revision)
			e.election = election
			s.log.Debug("etcdlock: acquired", "lock", name, "key", key, "token", e.rev)
			return e, nil
		}
	}

	// The enqueue is safe to repeat: a second put of the same key keeps its
	// create revision, and the read in the same Txn says what it is. So a
	// member failing under the request (its answer lost, the put maybe
	// applied) costs a retry, not the caller's Lock. The attempt that went
	// unanswered may still be applied later, though, after this key has
	// been released: so every attempt after one with an unknown outcome
	// moves the guard too, in its own Txn, which makes the earlier ones
	// fail their compare whenever they arrive.
	var (
		resp      *clientv3.TxnResponse
		uncertain bool
	)
	for {
		var err error
		// Each attempt gets its own bound: one that landed on a frozen or
		// cut-off member would otherwise hang until ctx ends, while the
		// client's balancer sends the next attempt to the next member.
		// Giving up on an attempt is safe for the reason above (the next
		// one moves the guard); it costs a guard move when a healthy
		// cluster was only slow.
		actx, acancel := context.WithTimeout(ctx, s.enqueueAttempt())
		resp, err = s.enqueueTxn(actx, put, qkey, qend, uncertain).Commit()
		attemptTimedOut := err != nil && actx.Err() != nil && ctx.Err() == nil
		acancel()
		if err == nil {
			if resp.Succeeded {
				if uncertain {
					s.sawGuard(resp.Header.Revision, resp.Header.Revision)
				}
				break
			}
			// Another Lock of this session cleaned up meanwhile: the
			// guard moved, nothing was written; go again.
			s.sawGuardIn(resp.Responses[0].GetResponseRange(), resp.Header.Revision)
			continue
		}
		uncertain = true
		if attemptTimedOut {
			s.log.Debug("etcdlock: enqueue unanswered; retrying on the next member", "lock", name, "after", s.enqueueAttempt())
			continue
		}
		if status.Code(err) != codes.Unavailable || ctx.Err() != nil || ctxwait.Sleep(ctx, retryDelay) != nil {
			s.abandon(key)
			return nil, fail(ctxErr(err))
		}
		s.log.Debug("etcdlock: enqueue failed; retrying", "lock", name, "err", err)
	}
	rev := resp.Header.Revision
	kvs := resp.Responses[1].GetResponseRange().Kvs
	all := make([]distlock.Entry, 0, len(kvs))
	for _, kv := range kvs {
		k := string(kv.Key)
		if k == key {
			rev = kv.CreateRevision // the first put's, if a retry repeated it
		}
		all = append(all, distlock.Entry{Key: k, Seq: kv.CreateRevision, Kind: entryKind(dir, k)})
	}
	if err := s.checkRev(key, rev, floor); err != nil {
		return nil, fail(err)
	}
	q := distlock.NewQueue(distlock.Entry{Key: key, Seq: rev, Kind: kind}, all)
	e := s.track(name, key, rev)
	e.election = election
	e.waited = len(q.Ahead()) > 0
	s.log.Debug("etcdlock: enqueued", "lock", name, "key", key, "rev", rev, "ahead", len(q.Ahead()))

	if err := e.wait(ctx, q); err != nil {
		e.abandon(err)
		return nil, fail(err)
	}
	s.log.Debug("etcdlock: acquired", "lock", name, "key", key, "token", rev)
	return e, nil
}

// enqueueTxn returns the enqueue Txn, not yet committed: if the session's
// guard is as last seen, put (the entry) and read the queue [qkey, qend)
// (Responses[1]), and with uncertain move the guard too; otherwise read
// the guard (Responses[0]).
func (s *Session) enqueueTxn(ctx context.Context, put clientv3.Op, qkey, qend string, uncertain bool) clientv3.Txn {
	ops := []clientv3.Op{put, clientv3.OpGet(qkey, clientv3.WithRange(qend), clientv3.WithKeysOnly())}
	if uncertain {
		ops = append(ops, s.guardPut())
	}
	return s.client.Txn(ctx).If(s.guardIs(s.guardRev())).Then(ops...).Else(s.guardGet())
}

// wait blocks until q says its owner holds the lock (distlock.WaitTurn),
// watching the predecessor and the nearest older entry (waitGone).
func (e *entry) wait(ctx context.Context, q *distlock.Queue) error {
	return distlock.WaitTurn(ctx, e.alive, q,
		func(ctx context.Context, p distlock.Entry) error { return e.waitGone(ctx, q, p) },
		func(ctx context.Context, below int64) { e.survivors(ctx, q, below) })
}

// waitGone waits until entry p of q is gone. Meanwhile, while entries older
// than p may still be in the queue, it follows the nearest of them as well:
// when that one goes, one read finds what is left older than p, so that by
// the time p goes — the handoff — q usually knows that nothing older is
// left and the new holder needs no request at all. In a FIFO queue the
// entry before p goes when p acquires, long before p releases.
func (e *entry) waitGone(ctx context.Context, q *distlock.Queue, p distlock.Entry) error {
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	pdone := e.s.goWaitDeleted(pctx, p, e.rev)
	for {
		older, ok := q.After(p)
		if !ok {
			return <-pdone
		}
		octx, ocancel := context.WithCancel(ctx)
		odone := e.s.goWaitDeleted(octx, older, e.rev)
		select {
		case err := <-pdone:
			ocancel()
			<-odone
			return err
		case err := <-odone:
			ocancel()
			if err != nil { // ctx ended
				pcancel()
				<-pdone
				return err
			}
			q.Gone(older.Key)
			e.survivors(ctx, q, p.Seq)
		}
	}
}

// goWaitDeleted runs waitDeleted for entry x in a goroutine and delivers its
// result; the goroutine ends when ctx does.
func (s *Session) goWaitDeleted(ctx context.Context, x distlock.Entry, known int64) <-chan error {
	done := make(chan error, 1)
	go func() { done <- s.waitDeleted(ctx, x.Key, x.Seq, known, false) }()
	return done
}

// survivors reads the nearest entry older than below that still conflicts
// with q's owner and records it in q. Serializable is enough (see
// distlock.Queue.Observed); an error leaves q as it was, which only means
// more watching.
func (e *entry) survivors(ctx context.Context, q *distlock.Queue, below int64) {
	ckey, cend := conflictRange(e.s.queueDir(e.name), q.Me().Kind, e.election)
	// Bounded: waitGone does not follow its predecessor's watch while this
	// runs, and a read that landed on a frozen member would hang.
	ctx, cancel := context.WithTimeout(ctx, e.s.hedgeDelay())
	defer cancel()
	resp, err := e.s.client.Get(ctx, ckey, clientv3.WithRange(cend), clientv3.WithSerializable(), clientv3.WithKeysOnly(),
		clientv3.WithMaxCreateRev(below-1), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(1))
	if err != nil {
		return
	}
	var nearest distlock.Entry
	found := len(resp.Kvs) > 0
	if found {
		kv := resp.Kvs[0]
		nearest = distlock.Entry{Key: string(kv.Key), Seq: kv.CreateRevision, Kind: entryKind(e.s.queueDir(e.name), string(kv.Key))}
	}
	q.Observed(below, nearest, found)
}

// track starts following key, created at rev, for deletion by others.
func (s *Session) track(name, key string, rev int64) *entry {
	alive, kill := context.WithCancelCause(s.ctx)
	e := &entry{s: s, name: name, key: key, rev: rev, alive: alive, kill: kill}
	s.goBackground(func(context.Context) {
		// From history: no read per acquisition, and a few more
		// milliseconds to notice a foreign delete do not matter.
		if s.waitDeleted(alive, key, rev, rev, true) == nil {
			// Past the session's deadline, the lease expiring is the likely
			// cause (the process may just have woken from a pause), and the
			// one to report, whichever of the two news came first.
			if !time.Now().Before(s.Deadline()) {
				kill(fmt.Errorf("%w: lease %x past its client-side deadline; key %s deleted", distlock.ErrSessionExpired, int64(s.id), key))
				return
			}
			kill(fmt.Errorf("%w: key %s", distlock.ErrEntryGone, key))
		}
	})
	return e
}

// hold turns an acquired entry into a Lease that is lost when the entry is.
func (e *entry) hold() *distlock.Lease {
	return distlock.HoldWhile(distlock.Token{Name: e.name, Seq: e.rev, Owner: uint64(e.s.id)}, e.alive, e.release, func(cause error) {
		e.s.log.Info("etcdlock: lock lost", "lock", e.name, "token", e.rev, "cause", cause)
	})
}

// release deletes the entry if it is still this acquisition's. It is the
// Lease's release function.
func (e *entry) release(ctx context.Context) error {
	known := e.alive.Err() != nil
	e.kill(distlock.ErrReleased)
	// Hedged: the delete is conditioned on the entry's create revision, so
	// a repeat is harmless, and one attempt must not hang on a frozen
	// member while the others could answer. An attempt that finds the key
	// gone while an earlier one is still out cannot tell "deleted by that
	// attempt" from "deleted by someone else": it waits (a few hedge
	// delays at most) for the others' answers, so that a slow member's
	// success is not reported as a lost lock.
	var (
		mu                sync.Mutex
		started, finished int
		won               *clientv3.TxnResponse
		changed           = make(chan struct{})
	)
	var attempts atomic.Int32
	resp, err := hedged(ctx, e.s.hedgeDelay(), func(ctx context.Context) (*clientv3.TxnResponse, error) {
		attempts.Add(1)
		mu.Lock()
		started++
		mu.Unlock()
		resp, err := e.s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(e.key), "=", e.rev)).
			Then(clientv3.OpDelete(e.key)).
			Commit()
		mu.Lock()
		finished++
		if err == nil && resp.Succeeded {
			won = resp
		}
		close(changed)
		changed = make(chan struct{})
		mu.Unlock()
		if err != nil || resp.Succeeded {
			return resp, err
		}
		wait := time.NewTimer(3 * e.s.hedgeDelay())
		defer wait.Stop()
		for {
			mu.Lock()
			w, all, ch := won, finished == started, changed
			mu.Unlock()
			if w != nil {
				return w, nil
			}
			if all {
				return resp, nil
			}
			select {
			case <-ch:
			case <-wait.C:
				return resp, nil
			case <-ctx.Done():
				return resp, nil
			}
		}
	})
	if err != nil {
		e.s.removeLater(e.key)
		return fmt.Errorf("delete key %s: %w (retrying in the background while the session lives)", e.key, e.s.storeErr(err))
	}
	if !resp.Succeeded && !known {
		if n := attempts.Load(); n > 1 {
			// Another attempt may have deleted it and lost its answer.
			// Reported as a loss all the same: the safe side of the doubt.
			return distlock.Lost(fmt.Errorf("%w: key %s was gone at unlock (deleted by someone else, or by one of this unlock's %d attempts whose answer did not come)", distlock.ErrEntryGone, e.key, n))
		}
		return distlock.Lost(fmt.Errorf("%w: key %s was already gone at unlock", distlock.ErrEntryGone, e.key))
	}
	e.s.log.Debug("etcdlock: released", "lock", e.name, "token", e.rev)
	return nil
}

// abandon is the failure path of a Lock that had enqueued: its put is
// known to have been applied (and any earlier attempt of it can no longer
// be, see acquireEntry), so a plain delete undoes it for good. A delete
// that does not go through within abandonTimeout is retried in the
// background while the session lives.
func (e *entry) abandon(cause error) {
	e.kill(cause)
	ctx, cancel := context.WithTimeout(context.Background(), abandonTimeout)
	defer cancel()
	if _, err := e.s.client.Delete(ctx, e.key); err != nil {
		e.s.log.Warn("etcdlock: cleanup failed; retrying in the background", "key", e.key, "err", err)
		e.s.removeLater(e.key)
	}
}

// removeLater deletes key in the background, retrying until it succeeds or
// the session ends (which takes the key away with the lease).
func (s *Session) removeLater(key string) {
	s.goBackground(func(ctx context.Context) {
		for delay := retryDelay; ; delay = min(2*delay, s.ttl/3) {
			dctx, cancel := context.WithTimeout(ctx, s.ttl/3)
			_, err := s.client.Delete(dctx, key)
			cancel()
			if err == nil || ctxwait.Sleep(ctx, delay) != nil {
				return
			}
		}
	})
}

// storeErr ends the session if err says the lease is gone, and returns err
// in terms of the distlock sentinels where one fits.
func (s *Session) storeErr(err error) error {
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		cause := fmt.Errorf("%w: lease %x not found on the server", distlock.ErrSessionExpired, int64(s.id))
		s.end(cause)
		return cause
	}
	return err
}

// heldBy describes the holder a losing TryLock saw.
func heldBy(resp *clientv3.TxnResponse) error {
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return distlock.ErrLocked
	}
	kv := kvs[0]
	who := ""
	if len(kv.Value) > 0 {
		who = fmt.Sprintf(", holder %q", kv.Value)
	}
	return fmt.Errorf("%w (entry %s, token %d%s)", distlock.ErrLocked, kv.Key, kv.CreateRevision, who)
}
