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
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
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
// candidates and term record, and the oldest foreign candidates
// (foreign.go), by one linearizable Txn of range reads (a page of a
// longer lock name's keys alone costs a Get more, at its revision).
func (r ClientStore) ReadElection(ctx context.Context, name string) (qlock.ElectionState, error) {
	dir := QueueDir(r.Prefix, name)
	kvs, fs, _, _, err := readElection(ctx, r.Client, dir, 0)
	if err != nil {
		return qlock.ElectionState{}, err
	}
	return electionState(dir, kvs, fs), nil
}

// readElection reads election dir's keys, its oldest foreign candidates
// (more says newer ones may be left out), and the revision of the read:
// at rev if it is set, else the current one.
func readElection(ctx context.Context, cli *clientv3.Client, dir string, rev int64) (kvs []*mvccpb.KeyValue, fs []qlock.Entry, more bool, at int64, err error) {
	key, end := electionRange(dir)
	base := baseOfDir(dir)
	cr := candidateRanges(base)
	var opts []clientv3.OpOption
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := cli.Txn(ctx).Then(
		clientv3.OpGet(key, append(opts, clientv3.WithRange(end))...),
		candidateGet(cr[0], rev, 0), candidateGet(cr[1], rev, 0)).Commit()
	if err != nil {
		return nil, nil, false, 0, err
	}
	at = resp.Header.Revision
	fs, more, err = foreignCandidates(ctx, cli, base, at,
		[]*pb.RangeResponse{resp.Responses[1].GetResponseRange(), resp.Responses[2].GetResponseRange()})
	if err != nil {
		return nil, nil, false, 0, err
	}
	return resp.Responses[0].GetResponseRange().Kvs, fs, more, at, nil
}

// Foreign candidates (etcd's Election, v3election, etcdctl elect: a key
// per lease, name + "/" + the lease in hex) start with a hex digit: the
// two ranges candidateRanges returns hold them all, and only the longer
// lock names' keys that start with one beside them.

// candidateRanges returns the key ranges of base's foreign candidates.
func candidateRanges(base string) [2][2]string {
	return [2][2]string{{base + "0", base + ":"}, {base + "a", base + "g"}}
}

// candidateGet reads the oldest keys of range cr created after minRev (if
// set), keys-only, at rev (if set).
func candidateGet(cr [2]string, rev, minRev int64) clientv3.Op {
	opts := []clientv3.OpOption{clientv3.WithRange(cr[1]), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(foreignLimit)}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	if minRev > 0 {
		opts = append(opts, clientv3.WithMinCreateRev(minRev))
	}
	return clientv3.OpGet(cr[0], opts...)
}

// foreignCandidates returns, oldest first, the foreign candidates of base
// that pages (the first read of each candidate range, oldest first, at
// rev) show, reading on where a page held only other keys and was cut
// short; more says that newer candidates may be left out.
func foreignCandidates(ctx context.Context, cli *clientv3.Client, base string, rev int64, pages []*pb.RangeResponse) ([]qlock.Entry, bool, error) {
	var out []qlock.Entry
	more := false
	cr := candidateRanges(base)
	for i, rr := range pages {
		for rr != nil {
			var last int64
			hit := false
			for _, kv := range rr.Kvs {
				last = kv.CreateRevision
				if f, c := classifyForeign(base, string(kv.Key)); c == foreignKnown && f.Candidate {
					out = append(out, qlock.Entry{Key: string(kv.Key), Seq: kv.CreateRevision, Kind: qlock.Candidate, Client: f.Client})
					hit = true
				}
			}
			if hit || !rr.More {
				more = more || rr.More
				break
			}
			op := candidateGet(cr[i], rev, last+1)
			resp, err := cli.Do(ctx, op)
			if err != nil {
				return nil, false, err
			}
			rr = (*pb.RangeResponse)(resp.Get())
		}
	}
	slices.SortFunc(out, func(a, b qlock.Entry) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, more, nil
}

// electionState is the state that election dir's keys kvs make, with
// foreign candidates fs.
func electionState(dir string, kvs []*mvccpb.KeyValue, fs []qlock.Entry) qlock.ElectionState {
	st := qlock.ElectionState{Foreign: slices.Clone(fs)}
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

// WatchElection follows election name's candidates and term record, and
// its foreign candidates (qlock.Elections). It reads them once, then
// follows them with one watch from the revision after that read, so
// nothing is missed between the two, and sends the state after every
// revision that changed it. The watch covers the range from the first
// foreign candidate range to the last (candidateRanges), which holds the
// election's own range too, so that all its events come in revision
// order; the keys between that are neither are skipped. When the watch
// fails — compaction of the revisions it needs, a member failing or
// losing its leader, a reconnect — it reads again and resumes from there;
// a change that came and went entirely within such a gap is not seen, but
// the state sent after it is the current one.
func (s *Session) WatchElection(ctx context.Context, name string, ch chan<- qlock.ElectionState) {
	defer close(ch)
	cli := s.client
	dir := s.Dir(name)
	send := func(kvs []*mvccpb.KeyValue, fs []qlock.Entry) bool {
		select {
		case ch <- electionState(dir, kvs, fs):
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		if ctx.Err() != nil || cli.Ctx().Err() != nil {
			return
		}
		kvs, fs, more, rev, err := readElection(ctx, cli, dir, 0)
		if err != nil {
			s.Log().Debug("etcdlock: election: read failed", "election", name, "err", err)
		} else if !send(kvs, fs) || !s.followElection(ctx, name, dir, rev, kvs, fs, more, send) {
			return
		}
		if ctxwait.Sleep(ctx, qlock.RetryDelay) != nil {
			return
		}
	}
}

// followElection applies the watch's events from revision rev+1 to kvs
// and the foreign candidates fs (more: newer ones may be unknown),
// sending the state after each revision that changed either; it returns
// false when the watch's user is gone, true when the watch failed and the
// election must be read again.
func (s *Session) followElection(ctx context.Context, name, dir string, rev int64, kvs []*mvccpb.KeyValue, fs []qlock.Entry, more bool, send func([]*mvccpb.KeyValue, []qlock.Entry) bool) bool {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	key, end := electionRange(dir)
	base := baseOfDir(dir)
	cr := candidateRanges(base)
	changed := false
	for resp := range s.client.Watch(wctx, cr[0][0], clientv3.WithRange(cr[1][1]), clientv3.WithRev(rev+1)) {
		if err := resp.Err(); err != nil || resp.Canceled {
			if errors.Is(err, rpctypes.ErrCompacted) {
				s.Log().Debug("etcdlock: election: compacted; reading again", "election", name, "rev", rev)
			} else {
				s.Log().Debug("etcdlock: election: watch ended; reading again", "election", name, "err", err)
			}
			return true
		}
		for i, ev := range resp.Events {
			k := string(ev.Kv.Key)
			if key <= k && k < end {
				idx := slices.IndexFunc(kvs, func(c *mvccpb.KeyValue) bool { return string(c.Key) == k })
				switch {
				case ev.Type == mvccpb.DELETE && idx >= 0:
					kvs = slices.Delete(kvs, idx, idx+1)
				case ev.Type == mvccpb.PUT && idx >= 0:
					kvs[idx] = ev.Kv
				case ev.Type == mvccpb.PUT:
					kvs = append(kvs, ev.Kv)
				}
				changed = true
			} else if f, c := classifyForeign(base, k); c == foreignKnown && f.Candidate {
				idx := slices.IndexFunc(fs, func(e qlock.Entry) bool { return e.Key == k })
				switch {
				case ev.Type == mvccpb.PUT && idx < 0 && (!more || len(fs) == 0):
					// Newer than every known one (and, with more, the
					// unknown ones are read when they matter).
					fs = append(fs, qlock.Entry{Key: k, Seq: ev.Kv.CreateRevision, Kind: qlock.Candidate, Client: f.Client})
					changed = true
				case ev.Type == mvccpb.DELETE && idx >= 0:
					fs = slices.Delete(slices.Clone(fs), idx, idx+1)
					changed = true
					if more {
						// An unknown one may be the oldest now.
						_, nfs, nmore, _, err := readElection(ctx, s.client, dir, ev.Kv.ModRevision)
						if err != nil {
							s.Log().Debug("etcdlock: election: foreign candidates unread; reading again", "election", name, "err", err)
							return true
						}
						fs, more = nfs, nmore
					}
				}
			}
			// One Txn's events share a revision: send the state after
			// all of them.
			if i+1 < len(resp.Events) && resp.Events[i+1].Kv.ModRevision == ev.Kv.ModRevision {
				continue
			}
			if changed {
				if !send(kvs, fs) {
					return false
				}
				changed = false
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
