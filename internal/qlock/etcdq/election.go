package etcdq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
	"github.com/distlock/distlock/internal/qlock"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Proclaim replaces the leader's value, in one Txn guarded by the entry's
// create revision: it writes only if this term's entry still exists, and
// fails with an error wrapping distlock.ErrNotLeader otherwise
// (qlock.Elections).
func (s *Session) Proclaim(ctx context.Context, n *qlock.Node, value string) error {
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(n.Key), "=", n.Seq)).
		Then(clientv3.OpPut(n.Key, value, clientv3.WithLease(s.id))).
		Commit()
	if err != nil {
		err = s.storeErr(err)
		if errors.Is(err, distlock.ErrSessionExpired) {
			return fmt.Errorf("%w: %w", distlock.ErrNotLeader, err)
		}
		return err
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: %w: key %s", distlock.ErrNotLeader, distlock.ErrEntryGone, n.Key)
	}
	return nil
}

// The term record (qlock's election.go) is the key dir + termMark, whose
// value is the leading candidate's key and whose mod revision is the
// term's token. It is put with the leader's lease (a handoff puts it with
// the successor's), so it goes with the leader's session; a Release of
// the leader deletes it too. 'l' sorts after the candidates' 'e' and
// before every other marker, so that one range, electionRange, holds the
// candidates and the record and nothing else.
const termMark = "l"

// electionRange is the key range of election dir's candidates and term
// record.
func electionRange(dir string) (key, end string) { return dir + electionMark, dir + "m" }

// ReadElection reads election name's state by one linearizable range read
// (qlock.Elections).
func (s *Session) ReadElection(ctx context.Context, name string) (qlock.ElectionState, error) {
	return s.ClientStore().ReadElection(ctx, name)
}

// ReadElection reads election name's state (qlock.ClientStore): its
// candidates and term record, by one linearizable range read.
func (r ClientStore) ReadElection(ctx context.Context, name string) (qlock.ElectionState, error) {
	dir := QueueDir(r.Prefix, name)
	key, end := electionRange(dir)
	resp, err := r.Client.Get(ctx, key, clientv3.WithRange(end))
	if err != nil {
		return qlock.ElectionState{}, err
	}
	return electionState(dir, resp.Kvs), nil
}

// electionState is the state that election dir's keys kvs make.
func electionState(dir string, kvs []*mvccpb.KeyValue) qlock.ElectionState {
	var st qlock.ElectionState
	for _, kv := range kvs {
		key := string(kv.Key)
		if key == dir+termMark {
			st.Term, st.Version, st.Leader = kv.ModRevision, kv.ModRevision, string(kv.Value)
			continue
		}
		if k, ok := entryKind(dir, key); ok && k == qlock.Candidate {
			st.Contenders = append(st.Contenders, qlock.Contender{
				Entry:    qlock.Entry{Key: key, Seq: kv.CreateRevision, Kind: qlock.Candidate},
				Priority: candidatePriority(dir, key),
				Value:    string(kv.Value),
				Owner:    uint64(kv.Lease),
			})
		}
	}
	slices.SortFunc(st.Contenders, func(a, b qlock.Contender) int { return cmp.Compare(a.Seq, b.Seq) })
	return st
}

// WatchElection follows election name's candidates and term record
// (qlock.Elections). It reads them once, then follows them with one watch
// from the revision after that read, so nothing is missed between the
// two, and sends the state after every revision that changed it. When the
// watch fails — compaction of the revisions it needs, a member failing or
// losing its leader, a reconnect — it reads again and resumes from there;
// a change that came and went entirely within such a gap is not seen, but
// the state sent after it is the current one.
func (s *Session) WatchElection(ctx context.Context, name string, ch chan<- qlock.ElectionState) {
	defer close(ch)
	cli := s.client
	dir := s.Dir(name)
	key, end := electionRange(dir)
	send := func(kvs []*mvccpb.KeyValue) bool {
		select {
		case ch <- electionState(dir, kvs):
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		if ctx.Err() != nil || cli.Ctx().Err() != nil {
			return
		}
		resp, err := cli.Get(ctx, key, clientv3.WithRange(end))
		if err != nil {
			s.Log().Debug("etcdlock: election: read failed", "election", name, "err", err)
		} else if !send(resp.Kvs) || !s.followElection(ctx, name, key, end, resp.Header.Revision, resp.Kvs, send) {
			return
		}
		if ctxwait.Sleep(ctx, qlock.RetryDelay) != nil {
			return
		}
	}
}

// followElection applies the watch's events from revision rev+1 to kvs,
// sending the state after each revision; it returns false when the
// watch's user is gone, true when the watch failed and the election must
// be read again.
func (s *Session) followElection(ctx context.Context, name, key, end string, rev int64, kvs []*mvccpb.KeyValue, send func([]*mvccpb.KeyValue) bool) bool {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range s.client.Watch(wctx, key, clientv3.WithRange(end), clientv3.WithRev(rev+1)) {
		if err := resp.Err(); err != nil || resp.Canceled {
			if errors.Is(err, rpctypes.ErrCompacted) {
				s.Log().Debug("etcdlock: election: compacted; reading again", "election", name, "rev", rev)
			} else {
				s.Log().Debug("etcdlock: election: watch ended; reading again", "election", name, "err", err)
			}
			return true
		}
		for i, ev := range resp.Events {
			idx := slices.IndexFunc(kvs, func(c *mvccpb.KeyValue) bool { return string(c.Key) == string(ev.Kv.Key) })
			switch {
			case ev.Type == mvccpb.DELETE && idx >= 0:
				kvs = slices.Delete(kvs, idx, idx+1)
			case ev.Type == mvccpb.PUT && idx >= 0:
				kvs[idx] = ev.Kv
			case ev.Type == mvccpb.PUT:
				kvs = append(kvs, ev.Kv)
			}
			// One Txn's events share a revision: send the state after
			// all of them.
			if i+1 < len(resp.Events) && resp.Events[i+1].Kv.ModRevision == ev.Kv.ModRevision {
				continue
			}
			if !send(kvs) {
				return false
			}
		}
	}
	return ctx.Err() == nil
}

// ClaimTerm puts the term record naming n's key, with this session's
// lease, in one Txn guarded by the record's mod revision as prev read it
// and by n's create revision (qlock.Elections).
func (s *Session) ClaimTerm(ctx context.Context, n *qlock.Node, prev qlock.ElectionState) (int64, error) {
	term := s.Dir(n.Name) + termMark
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(term), "=", prev.Version),
			clientv3.Compare(clientv3.CreateRevision(n.Key), "=", n.Seq)).
		Then(clientv3.OpPut(term, n.Key, clientv3.WithLease(s.id))).
		Commit()
	if err != nil {
		return 0, s.storeErr(err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("%w: claim by %s", qlock.ErrTermMoved, n.Key)
	}
	return resp.Header.Revision, nil
}

// HandOff deletes n's key and puts the term record naming to's, with to's
// lease, in one Txn guarded by the record's mod revision and both keys'
// create revisions (qlock.Elections).
func (s *Session) HandOff(ctx context.Context, n *qlock.Node, cur qlock.ElectionState, to qlock.Contender) (int64, error) {
	term := s.Dir(n.Name) + termMark
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(term), "=", cur.Version),
			clientv3.Compare(clientv3.CreateRevision(n.Key), "=", n.Seq),
			clientv3.Compare(clientv3.CreateRevision(to.Key), "=", to.Seq)).
		Then(clientv3.OpDelete(n.Key), clientv3.OpPut(term, to.Key, clientv3.WithLease(clientv3.LeaseID(to.Owner)))).
		Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return 0, fmt.Errorf("%w: the session of %s ended", qlock.ErrTermMoved, to.Key)
	}
	if err != nil {
		return 0, s.storeErr(err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("%w: handoff from %s to %s", qlock.ErrTermMoved, n.Key, to.Key)
	}
	return resp.Header.Revision, nil
}

// Revoker returns the revocation records of this session's client and
// prefix (qlock.Elections).
func (s *Session) ClientStore() qlock.ClientStore {
	return ClientStore{Client: s.client, Prefix: s.prefix}
}
