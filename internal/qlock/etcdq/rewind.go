package etcdq

import (
	"fmt"

	"github.com/distlock/distlock"
)

// checkRev makes sure the session never hands out two tokens with one
// revision. A token is (name, create revision, lease ID), and within one
// history of the cluster revisions are never reused. But a cluster
// restored from a snapshot without --bump-revision issues again the
// revisions issued after the snapshot, and brings back the leases granted
// before it: a session whose lease was in the snapshot, and whose
// keepalives bridged the restore, could then create a key with the
// revision of one of its own keys from before the restore — the same
// token for two acquisitions, which no fence can tell apart.
//
// floor is the highest create revision of the session's entries whose
// enqueue had answered before this entry's put was sent: in one history,
// a write sent after those answers commits at a higher revision. rev not
// above floor proves the history went back. The session then ends with
// distlock.ErrHistoryRewound (its locks are lost: their keys, written
// after the snapshot, are gone), revoking its lease, which takes the new
// key away too. Otherwise rev raises the floor for later entries.
//
// Entries whose puts were in flight together are not ordered by this, so
// a restore that falls between the send and the answer of two concurrent
// enqueues of one session is not detected; it needs the session's own
// two puts to straddle the restore, on one lock, and land on one revision.
func (s *Session) checkRev(key string, rev, floor int64) error {
	if rev <= floor {
		cause := fmt.Errorf("%w: key %s created at revision %d, not after revision %d of an earlier key of lease %x (etcd restored from a snapshot without --bump-revision?)",
			distlock.ErrHistoryRewound, key, rev, floor, int64(s.id))
		s.End(cause)
		s.abandon(key)
		s.revokeLater("a rewound history")
		return cause
	}
	for {
		cur := s.maxRev.Load()
		if rev <= cur || s.maxRev.CompareAndSwap(cur, rev) {
			return nil
		}
	}
}
