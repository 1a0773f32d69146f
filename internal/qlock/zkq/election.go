package zkq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/zkctx"
	"github.com/go-zookeeper/zk"
	"golang.org/x/sync/errgroup"
)

// Proclaim sets the leader's value (qlock.Elections): a SetData on the
// leader's node with the version this leadership last wrote, so it
// succeeds only while the node exists (and then this candidate leads: the
// term record moves on only once the node it names is gone). When the
// node is gone, the session is over, the node belongs to another session
// or the leadership has ended, it fails with an error wrapping
// distlock.ErrNotLeader. A bad version (a Proclaim of ours whose
// answer a connection loss cut off, or a foreign write) is resolved by
// reading the node again: only if it is still this session's is the value
// written.
//
// A Proclaim does not hand leadership over: it changes the leader's
// value, not the term record.
func (s *Session) Proclaim(ctx context.Context, n *qlock.Node, value string) error {
	e := state(n)
	notLeader := func(err error) error { return fmt.Errorf("%w: %w", distlock.ErrNotLeader, err) }
	for {
		if err := n.Alive().Err(); err != nil {
			return notLeader(context.Cause(n.Alive()))
		}
		if !s.ours() {
			return notLeader(s.expired("expired (the connection reports another session)"))
		}
		st, err := zkctx.Call(ctx, func() (*zk.Stat, error) { return s.conn.Set(n.Key, []byte(value), e.version) })
		switch {
		case err == nil:
			e.version = st.Version
			return nil
		case errors.Is(err, zk.ErrNoNode):
			return notLeader(fmt.Errorf("%w: node %s", distlock.ErrEntryGone, n.Key))
		case errors.Is(err, zk.ErrBadVersion):
			st, err := stat(ctx, s.conn, n.Key)
			switch {
			case err != nil && transient(err):
			case err != nil:
				return s.storeErr(err)
			case st == nil:
				return notLeader(fmt.Errorf("%w: node %s", distlock.ErrEntryGone, n.Key))
			case st.EphemeralOwner != s.id:
				return notLeader(fmt.Errorf("node %s belongs to session %#x", n.Key, st.EphemeralOwner))
			default:
				e.version = st.Version
				continue
			}
		case transient(err) && ctx.Err() == nil:
			// Maybe applied: the next try, with the same version, then
			// fails with a bad version and reads the node again.
		default:
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return s.storeErr(err)
		}
		if err := ctxwait.Sleep(ctx, qlock.RetryDelay); err != nil {
			return err
		}
	}
}

// The term record of an election is the data of its directory znode: the
// child name of the leading candidate's node. Its mzxid is the term's
// token and its data version what ClaimTerm and HandOff compare; empty
// data, or no directory, is no record. A candidate's position (Seq) is
// its node's czxid, as a revocation compares it (qlock.Position); within
// one directory it orders candidates as their sequence numbers do. This
// file writes the record (ClaimTerm, HandOff) and reads the election
// (ReadElection); election_watch.go follows it (WatchElection).

// ClaimTerm writes the term record naming n's node, if the record is still
// at prev's version and n's node exists, in one multi (qlock.Elections).
func (s *Session) ClaimTerm(ctx context.Context, n *qlock.Node, prev qlock.ElectionState) (int64, error) {
	dir := path.Dir(n.Key)
	rs, err := zkctx.Call(ctx, func() ([]zk.MultiResponse, error) {
		rs, err := s.conn.Multi(
			&zk.SetDataRequest{Path: dir, Data: []byte(childName(n.Key)), Version: int32(prev.Version)},
			&zk.CheckVersionRequest{Path: n.Key, Version: -1})
		return rs, multiErr(rs, err)
	})
	if err != nil {
		return 0, termErr(err, "claim the term for node "+n.Key)
	}
	return rs[0].Stat.Mzxid, nil
}

// HandOff deletes n's node and writes the term record naming to's node
// in one multi, if the record is still at cur's version and to's node
// exists (qlock.Elections).
func (s *Session) HandOff(ctx context.Context, n *qlock.Node, cur qlock.ElectionState, to qlock.Contender) (int64, error) {
	dir := path.Dir(n.Key)
	rs, err := zkctx.Call(ctx, func() ([]zk.MultiResponse, error) {
		rs, err := s.conn.Multi(
			&zk.DeleteRequest{Path: n.Key, Version: -1},
			&zk.SetDataRequest{Path: dir, Data: []byte(childName(to.Key)), Version: int32(cur.Version)},
			&zk.CheckVersionRequest{Path: to.Key, Version: -1})
		return rs, multiErr(rs, err)
	})
	if err != nil {
		return 0, termErr(err, "hand node "+n.Key+"'s term to "+to.Key)
	}
	s.forget(n.Key)
	return rs[1].Stat.Mzxid, nil
}

// termErr is the error of a failed claim or handoff: a compare that
// failed (the record's version, a node gone) is qlock.ErrTermMoved, and
// the multi wrote nothing; anything else is returned as it is, the write
// maybe made.
func termErr(err error, what string) error {
	if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("%s: %w (%w)", what, qlock.ErrTermMoved, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Revoker returns the session's revocation records (qlock.Elections).
func (s *Session) ClientStore() qlock.ClientStore { return s.revokeStore() }

func (s *Session) revokeStore() ClientStore {
	return ClientStore{Conn: s.conn, Prefix: s.prefix, ACL: s.acl}
}

// ReadElection reads election name's state (qlock.Elections).
func (s *Session) ReadElection(ctx context.Context, name string) (qlock.ElectionState, error) {
	return s.revokeStore().ReadElection(ctx, name)
}

// ReadElection reads election name's state after a Sync of its directory
// (so it is at least as new as every write acknowledged before the call):
// the term record first, then the candidates, each node read with its
// value (the reads go out together). The record is read before the
// listing so that a vacancy it shows is real: a node named by the record
// and missing from a later listing is gone for good. Candidates deleted
// between the listing and their read are left out. Foreign candidates
// (foreign.go) are read too, for the state's Foreign: a directory with
// none costs no more.
func (r ClientStore) ReadElection(ctx context.Context, name string) (qlock.ElectionState, error) {
	dir := r.Prefix + "/" + name
	fail := func(op string, err error) (qlock.ElectionState, error) {
		return qlock.ElectionState{}, fmt.Errorf("%s %s: %w", op, dir, err)
	}
	if err := synced(ctx, r.Conn, dir); err != nil {
		return fail("sync", err)
	}
	getNode := func(p string) (read, error) {
		return retry(ctx, func() (read, error) {
			d, st, err := r.Conn.Get(p)
			return read{d, st}, err
		})
	}
	rec, err := getNode(dir)
	if errors.Is(err, zk.ErrNoNode) {
		return qlock.ElectionState{}, nil
	}
	if err != nil {
		return fail("read", err)
	}
	children, err := listChildren(ctx, r.Conn, dir)
	if err != nil {
		return fail("list", err)
	}
	cands := candidates(dir, children)
	foreign := foreignCandidates(dir, children)
	reads := make([]read, len(cands)+len(foreign))
	var g errgroup.Group
	for i, key := range append(contenderKeys(cands), foreignKeys(foreign)...) {
		g.Go(func() error {
			var x read
			var err error
			if i < len(cands) {
				x, err = getNode(key)
			} else if x.stat, err = foreignStat(ctx, r.Conn, key); err == nil && x.stat == nil {
				err = zk.ErrNoNode
			}
			switch {
			case errors.Is(err, zk.ErrNoNode):
				// Gone since the listing.
			case err != nil:
				return fmt.Errorf("read %s: %w", key, err)
			default:
				reads[i] = x
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return qlock.ElectionState{}, err
	}
	st := termState(dir, rec.data, rec.stat)
	for i, c := range cands {
		if x := reads[i]; x.stat != nil {
			c.Seq, c.Owner, c.Value = x.stat.Czxid, uint64(x.stat.EphemeralOwner), string(x.data)
			st.Contenders = append(st.Contenders, c)
		}
	}
	sortContenders(st.Contenders)
	for i, f := range foreign {
		if x := reads[len(cands)+i]; x.stat != nil {
			f.Seq = x.stat.Czxid
			st.Foreign = append(st.Foreign, f)
		}
	}
	sortForeign(st.Foreign)
	return st, nil
}

// foreignCandidates returns the foreign candidates among dir's children
// (foreign.go), with their key and client: their positions, as the
// candidates', are their nodes' czxids, read from their nodes.
func foreignCandidates(dir string, children []string) []qlock.Entry {
	var out []qlock.Entry
	for _, c := range children {
		if c != "" && c[0] == '@' {
			continue // distlock's
		}
		if e, ok := foreignOf(dir, qlock.Candidate, c); ok {
			e.Seq = 0
			out = append(out, e)
		}
	}
	return out
}

func contenderKeys(cs []qlock.Contender) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Key
	}
	return out
}

func foreignKeys(es []qlock.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Key
	}
	return out
}

func sortForeign(es []qlock.Entry) {
	slices.SortFunc(es, func(a, b qlock.Entry) int { return cmp.Compare(a.Seq, b.Seq) })
}

// candidates returns the candidates among dir's children, with their key,
// kind and priority: their positions and values are read from their nodes.
func candidates(dir string, children []string) []qlock.Contender {
	var out []qlock.Contender
	for _, c := range children {
		if _, prio, _, ok := parseElectionEntry(c); ok {
			out = append(out, qlock.Contender{Entry: qlock.Entry{Key: dir + "/" + c, Kind: qlock.Candidate}, Priority: prio})
		}
	}
	return out
}

// termState is the state of the election in dir as its directory's data
// and Stat show it, without the candidates.
func termState(dir string, data []byte, st *zk.Stat) qlock.ElectionState {
	if st == nil {
		return qlock.ElectionState{}
	}
	out := qlock.ElectionState{Version: int64(st.Version)}
	if len(data) > 0 {
		out.Term, out.Leader = st.Mzxid, dir+"/"+string(data)
	}
	return out
}

func sortContenders(cs []qlock.Contender) {
	slices.SortFunc(cs, func(a, b qlock.Contender) int { return cmp.Compare(a.Seq, b.Seq) })
}
