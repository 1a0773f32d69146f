package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/distlock/distlock"
)

// ErrNoEntry reports that the lock entry whose token was asked for does
// not exist: a foreign Mutex that does not hold (never locked, unlocked,
// a TryLock lost), or a key released, expired or deleted since.
var ErrNoEntry = errors.New("no such lock entry")

// MutexToken returns the distlock fencing token of the acquisition m, a
// concurrency.Mutex of session s made with concurrency.NewMutex(s,
// prefix+name), holds: Seq is the create revision of m's key, Owner the
// key's lease, Name the lock's name. A distlock lock of that name under
// the same prefix (WithPrefix, default DefaultPrefix) shares its queue,
// so one fence (package fencing) admits the tokens of both kinds of
// holder in the order they held.
//
//	s, _ := concurrency.NewSession(cli)
//	m := concurrency.NewMutex(s, etcdlock.DefaultPrefix+"ledger")
//	if err := m.Lock(ctx); err != nil { ... }
//	tok, err := etcdlock.MutexToken(ctx, s, m, etcdlock.DefaultPrefix)
//	// tok.String() is "ledger@<revision>.<lease hex>"
//	_, err = fence.Write(ctx, tok, ops...) // an etcdfence.Fence of lock "ledger"
//
// The session is needed because a concurrency.Mutex does not export its
// client. The token is read, not derived from m.Header(): the header's
// revision is that of the acquiring request (the Get after a wait), which
// is not the key's and not ordered with distlock's tokens. The read is
// one Txn guarded by m.IsOwner, so it succeeds only while m's own key
// still exists with the create revision m acquired with; otherwise the
// error wraps ErrNoEntry, as it does when m holds no key.
func MutexToken(ctx context.Context, s *concurrency.Session, m *concurrency.Mutex, prefix string) (distlock.Token, error) {
	if s == nil || m == nil {
		return distlock.Token{}, fmt.Errorf("etcdlock: mutex token: %w: session or mutex is nil", distlock.ErrNilClient)
	}
	key := m.Key()
	if key == "" || key == "\x00" {
		return distlock.Token{}, fmt.Errorf("etcdlock: mutex token: %w: the mutex holds no key (not locked, or unlocked)", ErrNoEntry)
	}
	name, _, err := entryName(prefix, key)
	if err != nil {
		return distlock.Token{}, fmt.Errorf("etcdlock: mutex token: %w", err)
	}
	resp, err := s.Client().Txn(ctx).If(m.IsOwner()).Then(clientv3.OpGet(key)).Commit()
	if err != nil {
		return distlock.Token{}, fmt.Errorf("etcdlock: token of lock %q: read %q: %w", name, key, err)
	}
	if !resp.Succeeded || len(resp.Responses) == 0 || len(resp.Responses[0].GetResponseRange().Kvs) == 0 {
		return distlock.Token{}, fmt.Errorf("etcdlock: token of lock %q: %w: key %q is gone or was made again by another acquisition", name, ErrNoEntry, key)
	}
	kv := resp.Responses[0].GetResponseRange().Kvs[0]
	return entryToken(name, key, kv.CreateRevision, kv.Lease)
}

// EntryToken returns the distlock fencing token of the lock entry key
// under key prefix prefix (WithPrefix, default DefaultPrefix), whichever
// client made it: Seq is the key's create revision, Owner its lease, and
// Name the lock's name, read off the key by its recipe's layout:
//
//   - prefix + name + "/" + lease in hex: etcd's own lock and election
//     (concurrency.Mutex and Election, the v3lock service's LockResponse
//     key, v3election's LeaderKey, the key etcdctl lock and elect print);
//   - prefix + name + "/write/" or "/read/" + Unix nanoseconds: the
//     RWMutex of etcd's contrib recipes;
//   - prefix + name + "/@…": distlock's own entries (a distlock leader
//     fences with its term's token, distlock.Leadership's Token, not
//     its entry's).
//
// A v3lock client must not use the LockResponse's Header.Revision as its
// token: that is the revision the lock was granted at, which differs from
// the key's create revision whenever the caller waited, and is not
// ordered with the tokens of the lock's other holders; the same goes for
// the ETCD_LOCK_REV that etcdctl lock gives its command (ETCD_LOCK_KEY,
// the key, is what to pass here). The lease a holder locked with is its
// Owner, and etcd's own keys name it (their last segment).
//
//	// the key "etcdctl lock /distlock/ledger" printed
//	tok, err := etcdlock.EntryToken(ctx, cli, etcdlock.DefaultPrefix, "/distlock/ledger/694d7f0c8a1b2c3d")
//	// tok.String() is "ledger@<create revision>.694d7f0c8a1b2c3d"
//
// The read is one Get; a key that does not exist is an error wrapping
// ErrNoEntry, a key outside prefix or of no known layout one wrapping
// distlock.ErrInvalidName, and a key bound to no lease (which no lock
// recipe writes) one wrapping distlock.ErrInvalidToken. A token is the
// holder's only while its key exists: check it with the write
// (etcdfence.Fence.WriteHeld) where the resource allows.
func EntryToken(ctx context.Context, cli *clientv3.Client, prefix, key string) (distlock.Token, error) {
	if cli == nil {
		return distlock.Token{}, fmt.Errorf("etcdlock: entry token: %w: *clientv3.Client is nil", distlock.ErrNilClient)
	}
	name, lease, err := entryName(prefix, key)
	if err != nil {
		return distlock.Token{}, fmt.Errorf("etcdlock: entry token: %w", err)
	}
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return distlock.Token{}, fmt.Errorf("etcdlock: token of lock %q: read %q: %w", name, key, err)
	}
	if len(resp.Kvs) == 0 {
		return distlock.Token{}, fmt.Errorf("etcdlock: token of lock %q: %w: key %q does not exist (released, expired or deleted)", name, ErrNoEntry, key)
	}
	kv := resp.Kvs[0]
	if lease != "" && kv.Lease != 0 && lease != strconv.FormatInt(kv.Lease, 16) {
		// etcd's recipes name the key by the lease they bind it to: this
		// one was written by something else, whose order is not known.
		return distlock.Token{}, fmt.Errorf("etcdlock: token of lock %q: %w: key %q is bound to lease %x, not the one it names", name, distlock.ErrInvalidToken, key, kv.Lease)
	}
	return entryToken(name, key, kv.CreateRevision, kv.Lease)
}

// entryToken is the token of the key of lock name with that create
// revision and lease.
func entryToken(name, key string, rev, lease int64) (distlock.Token, error) {
	if lease == 0 {
		return distlock.Token{}, fmt.Errorf("etcdlock: token of lock %q: %w: key %q is bound to no lease, so no session holds it", name, distlock.ErrInvalidToken, key)
	}
	t := distlock.Token{Name: name, Seq: rev, Owner: uint64(lease)}
	if err := t.Validate(); err != nil {
		return distlock.Token{}, fmt.Errorf("etcdlock: token of lock %q: key %q: %w", name, key, err)
	}
	return t, nil
}

// entryName is the name of the lock whose queue key is in under prefix,
// by the layouts EntryToken lists, and for etcd's own layout the lease the
// key names; the error wraps distlock.ErrInvalidName.
func entryName(prefix, key string) (name, lease string, err error) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok || rest == "" {
		return "", "", fmt.Errorf("%w: key %q is not under prefix %q", distlock.ErrInvalidName, key, prefix)
	}
	switch i, j := strings.Index(rest, "/@"), strings.LastIndexByte(rest, '/'); {
	case i >= 0:
		// '@' never occurs in a lock name: what follows "/@" is
		// distlock's own.
		name = rest[:i]
	case j > 0 && isRecipesEntry(rest[:j], rest[j+1:]):
		name = rest[:strings.LastIndexByte(rest[:j], '/')]
	case j > 0 && isLeaseHex(rest[j+1:]):
		name, lease = rest[:j], rest[j+1:]
	default:
		return "", "", fmt.Errorf("%w: key %q under prefix %q is no lock entry of a layout distlock knows (name/<lease hex>, name/write/<nanos>, name/read/<nanos>, name/@…)", distlock.ErrInvalidName, key, prefix)
	}
	if err := distlock.ValidateName(name); err != nil {
		return "", "", fmt.Errorf("key %q under prefix %q: %w", key, prefix, err)
	}
	return name, lease, nil
}

// isRecipesEntry reports whether dir + "/" + last is a key of the etcd
// recipes' RWMutex: dir ends in "/write" or "/read" and last is a Unix
// time in nanoseconds, longer than any lease ID's 16 hex digits, so it is
// not taken for etcd's own key of a lock named ".../write".
func isRecipesEntry(dir, last string) bool {
	if !strings.HasSuffix(dir, "/write") && !strings.HasSuffix(dir, "/read") {
		return false
	}
	if len(last) <= 16 {
		return false
	}
	_, err := strconv.ParseUint(last, 10, 63)
	return err == nil
}

// isLeaseHex reports whether s is a lease ID as etcd's lock recipes write
// it: lower-case hex without leading zeros, at most 16 digits.
func isLeaseHex(s string) bool {
	if s == "" || len(s) > 16 || s[0] == '0' || strings.Trim(s, "0123456789abcdef") != "" {
		return false
	}
	return true
}
