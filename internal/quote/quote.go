// Package quote quotes user-given strings (lock names, keys, paths,
// table names) for error messages, cutting the ones too long to read.
package quote

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Whole is the longest string quoted whole: distlock.MaxNameLen, so that
// every valid lock name appears in full in the messages that name it.
const Whole = 256

// Head is how many bytes of a longer string a message shows.
const Head = 64

// Q returns s quoted as %q does if it is at most Whole bytes long, and
// otherwise its first Head bytes (cut at a character boundary) quoted,
// followed by "…(N bytes)" with s's full length: a message must stay
// readable when a caller passes a 5,000-byte name by mistake. The errors
// that quote a string keep it whole in their fields.
func Q(s string) string {
	if len(s) <= Whole {
		return strconv.Quote(s)
	}
	cut := Head
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(%d bytes)", strconv.Quote(s[:cut]), len(s))
}
