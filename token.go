package distlock

import (
	"fmt"
	"strconv"
	"strings"
)

// Token is the fencing token of one acquisition of a lock: the lock's name,
// a sequence number that is strictly larger for every later holder of the
// same lock, and the owner that acquired it.
//
// On etcd, Seq is the holder key's create revision and Owner the ID of the
// lease the key is bound to (the holder's session); on ZooKeeper, Seq is the
// holder znode's czxid and Owner the ZooKeeper session ID that owns the
// ephemeral znode. A resource protected by the lock admits a write carrying
// token T only if it has admitted no newer token for T.Name before, and no
// other acquisition with T's sequence number (see package fencing).
//
// # Why the owner
//
// Within one cluster's history Seq alone names one acquisition, but a
// cluster rebuilt from scratch or restored from a backup issues the same
// Seq numbers again, to other holders. Owner tells such acquisitions
// apart: the sessions of a rebuilt or restored cluster get other lease or
// session IDs, with near certainty, and a fence that sees an equal Seq with
// another Owner refuses it (fencing.ErrFork) instead of taking it for a
// retry. The reasoning, its one caveat, and how to restore a cluster so
// that its new tokens are newer than every old one are in the repository's
// docs/design.md ("Why a token carries its owner") and
// docs/operations.md (restores).
type Token struct {
	// Name is the lock's name (see ValidateName).
	Name string
	// Seq grows strictly from one holder of Name to the next; it is always
	// positive for a token issued by a lock.
	Seq int64
	// Owner identifies the session that acquired: the etcd lease ID, or
	// the ZooKeeper session ID, as the bits of an unsigned 64-bit integer.
	// It is never 0 in a token issued by a lock (0 is etcd's "no lease").
	Owner uint64
}

// String returns the stable text form "name@seq.owner": the name, '@',
// the sequence number in decimal, '.', and the owner in lower-case
// hexadecimal, both without leading zeros, e.g.
// "reports/daily@1042.694d7f0c8a1b2c3d". '@' never occurs in a lock name,
// so the form is unambiguous; it is safe in environment variables and HTTP
// header values. ParseToken reverses it. The owner is written in hex as
// etcdctl and ZooKeeper write lease and session IDs, so it can be matched
// with their output.
func (t Token) String() string {
	return t.Name + "@" + strconv.FormatInt(t.Seq, 10) + "." + strconv.FormatUint(t.Owner, 16)
}

// MarshalText implements encoding.TextMarshaler with the form of String.
func (t Token) MarshalText() ([]byte, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return []byte(t.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseToken.
func (t *Token) UnmarshalText(b []byte) error {
	p, err := ParseToken(string(b))
	if err != nil {
		return err
	}
	*t = p
	return nil
}

// IsZero reports whether t is the zero Token (no acquisition).
func (t Token) IsZero() bool { return t == Token{} }

// Validate reports whether t could have been issued by a lock: a valid
// name, a positive sequence number and a non-zero owner. The error wraps
// ErrInvalidToken.
func (t Token) Validate() error {
	if err := ValidateName(t.Name); err != nil {
		return fmt.Errorf("%w %s: %w", ErrInvalidToken, quoteName(t.String()), err)
	}
	if t.Seq <= 0 {
		return fmt.Errorf("%w %s: sequence %d is not positive", ErrInvalidToken, quoteName(t.String()), t.Seq)
	}
	if t.Owner == 0 {
		return fmt.Errorf("%w %s: no owner (a token names the lease or session that acquired)", ErrInvalidToken, quoteName(t.String()))
	}
	return nil
}

// ParseToken parses the text form produced by Token.String. It rejects
// empty input, a missing or malformed name, a sequence number that is not
// a positive decimal integer written without sign or leading zeros, and an
// owner that is not a non-zero lower-case hexadecimal integer of at most
// 16 digits without leading zeros: every token has exactly one text form.
// The form "name@seq" of earlier versions, which names no owner, is
// refused too: such a token cannot be told apart from another acquisition
// with the same sequence number, so a fence must not admit it. Errors wrap
// ErrInvalidToken.
func ParseToken(s string) (Token, error) {
	i := strings.LastIndexByte(s, '@')
	if s == "" || i < 0 {
		return Token{}, fmt.Errorf("%w %s: want \"name@seq.owner\"", ErrInvalidToken, quoteName(s))
	}
	name, rest := s[:i], s[i+1:]
	if err := ValidateName(name); err != nil {
		return Token{}, fmt.Errorf("%w %s: %w", ErrInvalidToken, quoteName(s), err)
	}
	num, own, ok := strings.Cut(rest, ".")
	if !ok {
		return Token{}, fmt.Errorf("%w %s: no owner: want \"name@seq.owner\" (the form \"name@seq\" of distlock before tokens named their owner is no longer accepted)", ErrInvalidToken, quoteName(s))
	}
	if num == "" || num[0] < '1' || num[0] > '9' {
		return Token{}, fmt.Errorf("%w %s: sequence %s is not a positive decimal without sign or leading zeros", ErrInvalidToken, quoteName(s), quoteName(num))
	}
	seq, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return Token{}, fmt.Errorf("%w %s: sequence %s: %v", ErrInvalidToken, quoteName(s), quoteName(num), err)
	}
	if own == "" || len(own) > 16 || own[0] == '0' || strings.Trim(own, "0123456789abcdef") != "" {
		return Token{}, fmt.Errorf("%w %s: owner %s is not a non-zero lower-case hexadecimal of at most 16 digits without leading zeros", ErrInvalidToken, quoteName(s), quoteName(own))
	}
	owner, err := strconv.ParseUint(own, 16, 64)
	if err != nil {
		return Token{}, fmt.Errorf("%w %s: owner %s: %v", ErrInvalidToken, quoteName(s), quoteName(own), err)
	}
	return Token{Name: name, Seq: seq, Owner: owner}, nil
}

// Compare orders two tokens of the same lock: -1 if t is older than u, 0
// if they are the same acquisition, +1 if t is newer. Tokens of different
// locks are not ordered; Compare returns an error wrapping ErrInvalidToken
// for them rather than guess. Tokens with equal Seq and different owners
// are two acquisitions a rebuilt or restored cluster issued with the same
// number; they are not ordered either, and the error wraps ErrTokenFork.
func (t Token) Compare(u Token) (int, error) {
	if t.Name != u.Name {
		return 0, fmt.Errorf("%w: tokens of different locks %s and %s are not ordered", ErrInvalidToken, quoteName(t.Name), quoteName(u.Name))
	}
	switch {
	case t.Seq < u.Seq:
		return -1, nil
	case t.Seq > u.Seq:
		return 1, nil
	case t.Owner != u.Owner:
		return 0, fmt.Errorf("%w: %v and %v", ErrTokenFork, t, u)
	}
	return 0, nil
}

// Newer reports whether t is a later acquisition of the same lock than u.
// It is false for tokens of different locks.
func (t Token) Newer(u Token) bool {
	c, err := t.Compare(u)
	return err == nil && c > 0
}

// Older reports whether t is an earlier acquisition of the same lock than u.
// It is false for tokens of different locks.
func (t Token) Older(u Token) bool {
	c, err := t.Compare(u)
	return err == nil && c < 0
}
