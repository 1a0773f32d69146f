package zklock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock/zkq"
	"github.com/distlock/distlock/internal/zkctx"
)

// ErrNoEntry reports that the lock entry whose token was asked for does
// not exist: the session has no entry in the lock's directory (it never
// locked, or released), or the node is gone (released, its session
// ended, or deleted).
var ErrNoEntry = errors.New("no such lock entry")

// HolderToken returns the distlock fencing token of the acquisition that
// conn's session holds of lock name under znode prefix prefix (WithPrefix,
// default DefaultPrefix), whichever recipe made it: go-zookeeper's
// zk.Lock, which does not export its node's path, or any other that keeps
// its entries in the lock's directory prefix + "/" + name (Curator's
// InterProcessMutex, kazoo's Lock, distlock's own). Seq is the entry
// node's czxid and Owner its ephemeral owner, conn's session ID: the
// token distlock gives a holder of that node, so that one fence (package
// fencing) admits the tokens of every kind of holder of the lock in the
// order they held.
//
//	l := zk.NewLock(conn, zklock.DefaultPrefix+"/ledger", zk.WorldACL(zk.PermAll))
//	if err := l.Lock(); err != nil { ... }
//	tok, err := zklock.HolderToken(ctx, conn, zklock.DefaultPrefix, "ledger")
//	// tok.String() is "ledger@<czxid>.<session ID in hex>"
//	_, err = fence.Write(ctx, tok, ops...) // a zkfence.Fence of lock "ledger"
//
// The entry is the session's oldest in the directory (by the sequence
// number the server appended to its name): the one a holder holds by,
// also when the session has later entries queued there (a Curator read
// lock upgraded to a write lock, a second Lock of another instance).
// HolderToken does not decide whether that entry holds: the recipe that
// made it does, so call it once the recipe's Lock has returned. It lists
// the directory and reads the Stat of its entries, oldest first, until it
// finds one of the session's: one request per entry ahead of the
// session's. An error wraps ErrNoEntry when the session has no entry
// there, distlock.ErrInvalidName for a bad prefix or name.
func HolderToken(ctx context.Context, conn *zk.Conn, prefix, name string) (distlock.Token, error) {
	if conn == nil {
		return distlock.Token{}, fmt.Errorf("zklock: holder token: %w: *zk.Conn is nil", distlock.ErrNilClient)
	}
	if err := zkq.CheckPrefix(prefix); err != nil {
		return distlock.Token{}, fmt.Errorf("zklock: holder token: %w", err)
	}
	if err := distlock.ValidateName(name); err != nil {
		return distlock.Token{}, fmt.Errorf("zklock: holder token: %w", err)
	}
	sid := conn.SessionID()
	if sid == 0 {
		return distlock.Token{}, fmt.Errorf("zklock: token of lock %q: %w: the connection has no session", name, ErrNoEntry)
	}
	dir := prefix + "/" + name
	children, err := zkctx.Call(ctx, func() ([]string, error) {
		c, _, err := conn.Children(dir)
		return c, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		children, err = nil, nil
	}
	if err != nil {
		return distlock.Token{}, fmt.Errorf("zklock: token of lock %q: list %s: %w", name, dir, err)
	}
	type child struct {
		name string
		seq  int64
	}
	var seqd []child
	for _, c := range children {
		if s, ok := nodeSeq(c); ok {
			seqd = append(seqd, child{c, s})
		}
	}
	slices.SortFunc(seqd, func(a, b child) int { return cmp.Compare(a.seq, b.seq) })
	for _, c := range seqd {
		st, err := stat(ctx, conn, dir+"/"+c.name)
		if errors.Is(err, ErrNoEntry) {
			continue // gone since the listing: not the session's (it still holds its own)
		}
		if err != nil {
			return distlock.Token{}, fmt.Errorf("zklock: token of lock %q: %w", name, err)
		}
		if st.EphemeralOwner == sid {
			return nodeToken(name, dir+"/"+c.name, st)
		}
	}
	return distlock.Token{}, fmt.Errorf("zklock: token of lock %q: %w: session %x has no entry in %s", name, ErrNoEntry, uint64(sid), dir)
}

// EntryToken returns the distlock fencing token of the lock entry node
// path, whichever client made it, under znode prefix prefix (WithPrefix,
// default DefaultPrefix): Seq is the node's czxid, Owner its ephemeral
// owner (the session that made it), Name the lock's name, which is the
// path between prefix and the node's own name. It is for a client that
// knows its node's path: a Curator InterProcessMutex's lock node, a kazoo
// Lock's node (what a foreign process would otherwise compute with
// checkExists().forPath(path) or zk.exists(node), see the repository's
// docs/interop.md).
//
//	tok, err := zklock.EntryToken(ctx, conn, "/distlock", "/distlock/ledger/_c_0f3e…-lock-0000000007")
//
// One request (Exists). A node that does not exist is an error wrapping
// ErrNoEntry; one outside prefix, or whose lock name is not valid, one
// wrapping distlock.ErrInvalidName; a persistent node (no session owns
// it, so it is no lock entry) one wrapping distlock.ErrInvalidToken.
func EntryToken(ctx context.Context, conn *zk.Conn, prefix, path string) (distlock.Token, error) {
	if conn == nil {
		return distlock.Token{}, fmt.Errorf("zklock: node token: %w: *zk.Conn is nil", distlock.ErrNilClient)
	}
	if err := zkq.CheckPrefix(prefix); err != nil {
		return distlock.Token{}, fmt.Errorf("zklock: node token: %w", err)
	}
	rest, ok := strings.CutPrefix(path, prefix+"/")
	i := strings.LastIndexByte(rest, '/')
	if !ok || i <= 0 || i == len(rest)-1 {
		return distlock.Token{}, fmt.Errorf("zklock: node token: %w: %q is no node of a lock's directory under prefix %q", distlock.ErrInvalidName, path, prefix)
	}
	name := rest[:i]
	if err := distlock.ValidateName(name); err != nil {
		return distlock.Token{}, fmt.Errorf("zklock: node token: node %q: %w", path, err)
	}
	st, err := stat(ctx, conn, path)
	if err != nil {
		return distlock.Token{}, fmt.Errorf("zklock: token of lock %q: %w", name, err)
	}
	return nodeToken(name, path, st)
}

// stat reads the Stat of node p; a node that does not exist is an error
// wrapping ErrNoEntry.
func stat(ctx context.Context, conn *zk.Conn, p string) (*zk.Stat, error) {
	type res struct {
		ok bool
		st *zk.Stat
	}
	r, err := zkctx.Call(ctx, func() (res, error) {
		ok, st, err := conn.Exists(p)
		return res{ok, st}, err
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if !r.ok || r.st == nil {
		return nil, fmt.Errorf("%w: node %s does not exist (released, its session ended, or deleted)", ErrNoEntry, p)
	}
	return r.st, nil
}

// nodeToken is the token of node p of lock name with Stat st.
func nodeToken(name, p string, st *zk.Stat) (distlock.Token, error) {
	if st.EphemeralOwner == 0 {
		return distlock.Token{}, fmt.Errorf("zklock: token of lock %q: %w: node %s is persistent, so no session holds it", name, distlock.ErrInvalidToken, p)
	}
	t := distlock.Token{Name: name, Seq: st.Czxid, Owner: uint64(st.EphemeralOwner)}
	if err := t.Validate(); err != nil {
		return distlock.Token{}, fmt.Errorf("zklock: token of lock %q: node %s: %w", name, p, err)
	}
	return t, nil
}

// nodeSeq is the sequence number ZooKeeper appended to a sequential
// node's name: its last ten characters, a zero-padded decimal. Every
// recipe's entries end in one.
func nodeSeq(child string) (int64, bool) {
	if len(child) < 10 {
		return 0, false
	}
	s, err := strconv.ParseInt(child[len(child)-10:], 10, 64)
	return s, err == nil
}
