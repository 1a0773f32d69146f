package zkq

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/go-zookeeper/zk"
)

// Foreign entries. Other clients' lock and election recipes on ZooKeeper
// keep their queues the way distlock does: ephemeral sequential children
// of one directory, ordered by their sequence suffix. When they use the
// same directory as a distlock lock (the same path), the two queues are
// one: every sequential child of a directory takes its number from the
// directory's one counter, so a foreign entry's suffix orders it among
// distlock's entries exactly. The engine waits for a recognised foreign
// entry like for its own (the nearest conflicting one is watched, no
// herd), and no candidate leads while an older foreign candidate exists.
//
// The names recognised, each "<base><seq>" with seq ZooKeeper's
// ten-digit suffix:
//
//   - Curator's InterProcessMutex and LeaderSelector: "lock-" or, as
//     Curator creates it (protected), "_c_<UUID>-lock-": exclusive in the
//     lock queue, a candidate in the election's;
//   - Curator's InterProcessReadWriteLock: any name ending in "__WRIT__"
//     (exclusive) or "__READ__" (shared) before the suffix, as Curator
//     itself matches them: the lock queue only;
//   - Curator's LeaderLatch: "latch-", protected or not: the election
//     only;
//   - kazoo's Lock, WriteLock and Election: "<32 hex>__lock__": exclusive,
//     and a candidate; kazoo's ReadLock "<32 hex>__rlock__": shared, the
//     lock queue only;
//   - go-zookeeper's zk.Lock: "_c_<32 hex>-lock-": exclusive, and a
//     candidate.
//
// distlock's own entries in a compatibility mode (names.go) carry these
// recipes' markers too, so that those recipes wait for them; they start
// with "@<kind>-<guid>", are parsed as distlock's before any foreign rule
// is tried, and parseForeign takes no name starting with '@'.
//
// Every other child that ends in a sequence suffix, whatever its base, is
// an unknown recipe's entry (ClientUnknown): it is reported, not waited
// for, since neither its kind nor its recipe's rule is known. Children
// without a suffix are no entries: a valid lock-name segment is a
// sub-lock's directory (Curator's semaphore directories "locks" and
// "leases", and kazoo's Semaphore leases "<32 hex>", look exactly like
// one, and are not reported), a child starting with '@' is distlock's
// (its entries, a semaphore's "@permits"); any other name is unknown.
// Semaphores take no foreign entry into account. The names alone decide,
// so that a directory without foreign entries costs no request more: a
// sub-lock named like a foreign entry ("jobs/lock-0000000001") is taken
// for one by lock "jobs", and one whose last segment ends in ten digits
// is reported as unknown.
//
// A foreign client marks no release (its holder just deletes its node),
// so WaitGone takes the deletion of a foreign entry for a session's end
// (a lock-delay is served behind it) and a change of its data for
// nothing. Elections need no watch of their own for foreign candidates:
// WatchElection lists the directory after every change of its children.

// foreignEntry is what a foreign child's name tells.
type foreignEntry struct {
	client string
	// lock is the entry's kind in the lock queue; inLock is false for an
	// election-only entry (Curator's LeaderLatch).
	lock   qlock.Kind
	inLock bool
	// candidate says the entry is a candidate of the election queue.
	candidate bool
	seq       int64
}

// The bases of the recognised recipes' names, without the protection
// prefix.
const (
	curatorLock  = "lock-"
	curatorWrite = "__WRIT__"
	curatorRead  = "__READ__"
	curatorLatch = "latch-"
	kazooLock    = "__lock__"
	kazooRead    = "__rlock__"
	// protectedPrefix starts a protected create's name: Curator's and
	// go-zookeeper's, "_c_<id>-" with a UUID (Curator) or 32 hex digits
	// (go-zookeeper) as id.
	protectedPrefix = "_c_"
)

// seqSuffix splits a sequential child's name into its base and sequence
// number. ZooKeeper appends the directory's counter as "%010d": ten
// digits, or, once the signed 32-bit counter has wrapped, a '-' and nine
// digits (or "-2147483648"). A wrapped number is taken modulo 2^32, so
// that it orders after the numbers before the wrap, as its creation does.
func seqSuffix(child string) (base string, seq int64, ok bool) {
	n := len(child)
	if n < 10 {
		return "", 0, false
	}
	if strings.HasSuffix(child, "-2147483648") {
		return child[:n-11], 1 << 31, true
	}
	num := child[n-10:]
	neg := num[0] == '-'
	if neg {
		num = num[1:]
	}
	for _, c := range []byte(num) {
		if c < '0' || c > '9' {
			return "", 0, false
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return "", 0, false
	}
	if neg {
		v = 1<<32 - v
	}
	return child[:n-10], v, true
}

// parseForeign parses a child name of a recognised foreign recipe.
func parseForeign(child string) (foreignEntry, bool) {
	if child == "" || child[0] == '@' {
		return foreignEntry{}, false
	}
	base, seq, ok := seqSuffix(child)
	if !ok {
		return foreignEntry{}, false
	}
	f := foreignEntry{seq: seq}
	switch {
	case strings.HasSuffix(base, kazooLock) && isHex(base[:len(base)-len(kazooLock)], 32):
		f.client, f.lock, f.inLock, f.candidate = distlock.ClientKazoo, qlock.Exclusive, true, true
		return f, true
	case strings.HasSuffix(base, kazooRead) && isHex(base[:len(base)-len(kazooRead)], 32):
		f.client, f.lock, f.inLock = distlock.ClientKazoo, qlock.Shared, true
		return f, true
	case strings.HasSuffix(base, curatorWrite):
		// Curator finds a read-write lock's node by the marker anywhere
		// in its name, whatever comes before it.
		f.client, f.lock, f.inLock = distlock.ClientCurator, qlock.Exclusive, true
		return f, true
	case strings.HasSuffix(base, curatorRead):
		f.client, f.lock, f.inLock = distlock.ClientCurator, qlock.Shared, true
		return f, true
	}
	name, id, protected := unprotect(base)
	if protected && len(id) == 32 {
		// go-zookeeper's zk.Lock, the one recipe with such an id.
		if name != curatorLock {
			return foreignEntry{}, false
		}
		f.client, f.lock, f.inLock, f.candidate = distlock.ClientGoZookeeper, qlock.Exclusive, true, true
		return f, true
	}
	if protected && len(id) != 36 || !protected && base != name {
		return foreignEntry{}, false
	}
	f.client = distlock.ClientCurator
	switch name {
	case curatorLock:
		f.lock, f.inLock, f.candidate = qlock.Exclusive, true, true
	case curatorLatch:
		f.candidate = true
	default:
		return foreignEntry{}, false
	}
	return f, true
}

// unprotect splits a protected create's base "_c_<id>-<name>" into name
// and id (32 hex digits, or a UUID of 36 characters); protected is false,
// and name the base itself, for any other base.
func unprotect(base string) (name, id string, protected bool) {
	if !strings.HasPrefix(base, protectedPrefix) {
		return base, "", false
	}
	rest := base[len(protectedPrefix):]
	if len(rest) > 32 && rest[32] == '-' && isHex(rest[:32], 32) {
		return rest[33:], rest[:32], true
	}
	if len(rest) > 36 && rest[36] == '-' && isUUID(rest[:36]) {
		return rest[37:], rest[:36], true
	}
	return base, "", false
}

// isHex reports whether s is n hex digits.
func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// isUUID reports whether s is a UUID in its text form, 8-4-4-4-12 hex
// digits (what Java's UUID.toString writes).
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, g := range []int{0, 9, 14, 19, 24} {
		end := []int{8, 13, 18, 23, 36}[i]
		if !isHex(s[g:end], end-g) || end < 36 && s[end] != '-' {
			return false
		}
	}
	return true
}

// unknownChild reports whether a child of a lock's directory that is no
// entry of distlock's nor of a recognised recipe is reported as an
// unknown client's (see above): one with a sequence suffix, or one that
// is no lock-name segment and not distlock's.
func unknownChild(child string) bool {
	if _, _, _, ok := parseAny(child); ok {
		return false
	}
	if _, ok := parseForeign(child); ok {
		return false
	}
	if _, _, ok := seqSuffix(child); ok {
		return true
	}
	if strings.HasPrefix(child, "@") {
		return false
	}
	return distlock.ValidateName(child) != nil
}

// foreignOf returns the foreign entry child is in the queue of an entry
// of kind k, if it is one: in the lock queue with its lock kind, in the
// election's as a candidate; none in a semaphore's line.
func foreignOf(dir string, k qlock.Kind, child string) (qlock.Entry, bool) {
	f, ok := parseForeign(child)
	if !ok {
		return qlock.Entry{}, false
	}
	e := qlock.Entry{Key: dir + "/" + child, Seq: f.seq, Client: f.client}
	switch queueOf(k) {
	case 0:
		e.Kind = f.lock
		return e, f.inLock
	case 1:
		e.Kind = qlock.Candidate
		return e, f.candidate
	}
	return qlock.Entry{}, false
}

// warnUnknown logs, once per lock name for the session, the first
// unknown child an enqueue's listing of lock name's directory shows: an
// entry of a recipe the library does not know, which it cannot wait for.
func (s *Session) warnUnknown(name string, children []string) {
	if _, seen := s.warned.Load(name); seen {
		return
	}
	for _, c := range children {
		if !unknownChild(c) {
			continue
		}
		if _, seen := s.warned.LoadOrStore(name, true); !seen {
			s.Log().Warn("zklock: a child of the lock's directory is no entry of a recipe the library knows; it is not waited for (see docs/interop.md)",
				"lock", name, "child", s.Dir(name)+"/"+c)
		}
		return
	}
}

// watchForeign sets a watch on foreign entry p's node (WaitGone): a data
// watch as on distlock's own or, where the foreign client's ACL refuses
// this session reading the node, a child watch on its directory. The
// servers deliver no event of a node its watcher may not read (neither
// a data nor an exists watch fires at its deletion), but the directory's
// change does; ok is false when p is not listed any more. That watch
// wakes on every change of the directory: the price of an unreadable
// entry, paid only behind one.
func (s *Session) watchForeign(ctx context.Context, p string) (ch <-chan zk.Event, ok bool, err error) {
	pw, ok, err := s.getW(ctx, p)
	if !errors.Is(err, zk.ErrNoAuth) {
		return pw.ch, ok, err
	}
	dir := p[:strings.LastIndexByte(p, '/')]
	type listing struct {
		children []string
		ch       <-chan zk.Event
	}
	l, err := retry(ctx, func() (listing, error) {
		c, _, ch, err := s.conn.ChildrenW(dir)
		return listing{c, ch}, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, s.storeErr(err)
	}
	return l.ch, slices.Contains(l.children, childName(p)), nil
}

// foreignStat reads a foreign node's Stat, nil if it is gone: an Exists,
// which needs no permission on the node (the foreign client's ACL may
// refuse a read).
func foreignStat(ctx context.Context, conn *zk.Conn, p string) (*zk.Stat, error) {
	return stat(ctx, conn, p)
}
