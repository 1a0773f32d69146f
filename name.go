package distlock

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxNameLen is the longest lock name accepted, in bytes.
const MaxNameLen = 256

// MaxMultiNames is the most locks one multi-lock (the stores'
// MultiMutex) takes at once. Its entries are made in one atomic write:
// on etcd one Txn of three operations per lock, which must stay within
// the server's default limit of 128 operations per Txn.
const MaxMultiNames = 32

// ValidateNames checks the names of a multi-lock: one to MaxMultiNames
// names, each valid (ValidateName), none twice. It returns them sorted,
// the order the lock's tokens and entries follow; the order the caller
// gives does not matter.
func ValidateNames(names []string) ([]string, error) {
	label := strings.Join(names, "+")
	bad := func(why string) error {
		return &LockError{Name: label, Op: OpValidate, Err: fmt.Errorf("%w: %s", ErrInvalidName, why)}
	}
	switch {
	case len(names) == 0:
		return nil, bad("no lock names")
	case len(names) > MaxMultiNames:
		return nil, bad(fmt.Sprintf("%d lock names, more than %d", len(names), MaxMultiNames))
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	for i, n := range sorted {
		if err := ValidateName(n); err != nil {
			return nil, err
		}
		if i > 0 && sorted[i-1] == n {
			return nil, bad(fmt.Sprintf("name %s given twice", quoteName(n)))
		}
	}
	return sorted, nil
}

// ValidateName checks a lock name. A name is one or more segments joined by
// '/', each made of ASCII letters, digits, '.', '_' and '-', and neither "."
// nor "..". Examples: "reports/daily", "ledger.v2", "tenant-42/billing".
//
// The rules keep '@' and every other character out of names on purpose:
// backends put lock entries under "<name>/@<entry>", and because no segment
// can start with '@', the entries of lock "a" can never be mistaken for
// those of lock "a/b" (or the other way round), whatever the names.
//
// The error wraps ErrInvalidName and says what is wrong. It is a
// *LockError whose Name is name whole; its message cuts a name longer
// than MaxNameLen to its first 64 bytes and its length.
func ValidateName(name string) error {
	bad := func(why string) error {
		return &LockError{Name: name, Op: OpValidate, Err: fmt.Errorf("%w: %s", ErrInvalidName, why)}
	}
	switch {
	case name == "":
		return bad("empty")
	case len(name) > MaxNameLen:
		return bad(fmt.Sprintf("longer than %d bytes (%d)", MaxNameLen, len(name)))
	case strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/"):
		return bad("leading or trailing '/'")
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == "" {
			return bad("empty segment (\"//\")")
		}
		if seg == "." || seg == ".." {
			return bad(fmt.Sprintf("segment %s", quoteName(seg)))
		}
		for _, r := range seg {
			if r >= utf8.RuneSelf || !nameByte(byte(r)) {
				return bad(fmt.Sprintf("character %q at segment %s: only ASCII letters, digits, '.', '_', '-' and '/' are allowed", r, quoteName(seg)))
			}
		}
	}
	return nil
}

func nameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == '_' || c == '-'
}
