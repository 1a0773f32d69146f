package distlock

import (
	"fmt"
	"strconv"
	"strings"
)

// Token is the fencing token of one acquisition of a lock: the lock's name
// and a sequence number that is strictly larger for every later holder of
// the same lock. On etcd, Seq is the holder key's create revision; on
// ZooKeeper, the holder znode's czxid. Both survive leader changes and are
// never reused by the cluster that issued them.
//
// A resource protected by the lock admits a write carrying token T only if
// it has admitted no newer token for T.Name before (see package fencing).
//
// The token deliberately carries no cluster identity. etcd derives its
// cluster ID from the initial member configuration, so a cluster rebuilt
// with the same configuration has the same ID and would pass such a check,
// and ZooKeeper exposes no ID at all. What a rebuilt cluster does is restart
// its revisions or zxids near zero: its tokens are then SMALLER than the
// ones a resource has already seen, so fencing refuses them. That fails
// safe (no stale write is admitted) but blocks the resource until it is
// told to forget the old tokens or the lock is renamed, e.g. by putting a
// generation in the name ("ledger/g2"). Operators rebuilding a cluster must
// do one of the two.
type Token struct {
	// Name is the lock's name (see ValidateName).
	Name string
	// Seq grows strictly from one holder of Name to the next; it is always
	// positive for a token issued by a lock.
	Seq int64
}

// String returns the stable text form "name@seq", e.g. "reports/daily@1042".
// '@' never occurs in a lock name, so the form is unambiguous; it is safe in
// environment variables and HTTP header values. ParseToken reverses it.
func (t Token) String() string {
	return t.Name + "@" + strconv.FormatInt(t.Seq, 10)
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

// Validate reports whether t could have been issued by a lock: a valid name
// and a positive sequence number. The error wraps ErrInvalidToken.
func (t Token) Validate() error {
	if err := ValidateName(t.Name); err != nil {
		return fmt.Errorf("%w %q: %w", ErrInvalidToken, t.String(), err)
	}
	if t.Seq <= 0 {
		return fmt.Errorf("%w %q: sequence %d is not positive", ErrInvalidToken, t.String(), t.Seq)
	}
	return nil
}

// ParseToken parses the text form produced by Token.String. It rejects empty
// input, a missing or malformed name, and a sequence number that is not a
// positive decimal integer written without sign or leading zeros (so every
// token has exactly one text form). Errors wrap ErrInvalidToken.
func ParseToken(s string) (Token, error) {
	i := strings.LastIndexByte(s, '@')
	if s == "" || i < 0 {
		return Token{}, fmt.Errorf("%w %q: want \"name@seq\"", ErrInvalidToken, s)
	}
	name, num := s[:i], s[i+1:]
	if err := ValidateName(name); err != nil {
		return Token{}, fmt.Errorf("%w %q: %w", ErrInvalidToken, s, err)
	}
	if num == "" || num[0] < '1' || num[0] > '9' {
		return Token{}, fmt.Errorf("%w %q: sequence %q is not a positive decimal without sign or leading zeros", ErrInvalidToken, s, num)
	}
	seq, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return Token{}, fmt.Errorf("%w %q: sequence %q: %v", ErrInvalidToken, s, num, err)
	}
	return Token{Name: name, Seq: seq}, nil
}

// Compare orders two tokens of the same lock: -1 if t is older than u, 0 if
// they are the same acquisition, +1 if t is newer. Tokens of different locks
// are not ordered; Compare returns an error wrapping ErrInvalidToken for
// them rather than guess.
func (t Token) Compare(u Token) (int, error) {
	if t.Name != u.Name {
		return 0, fmt.Errorf("%w: tokens of different locks %q and %q are not ordered", ErrInvalidToken, t.Name, u.Name)
	}
	switch {
	case t.Seq < u.Seq:
		return -1, nil
	case t.Seq > u.Seq:
		return 1, nil
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
