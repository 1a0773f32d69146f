package zkfence

import (
	"strconv"
	"testing"

	"github.com/distlock/distlock"
)

// FuzzDecode: a fence node's data decodes only if it is exactly what
// encode writes for the decoded token, or the canonical decimal number
// alone that earlier versions wrote (owner 0): one form per stored token.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{"5", "5.1", "5.0", "05", "+5", "-5", "5.A", "5.01", "5.1.1", "9223372036854775807.ffffffffffffffff", "", "x"} {
		f.Add([]byte(s))
	}
	fence := &Fence{lock: "ledger"}
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := fence.decode(data)
		if err != nil {
			return
		}
		if tok.Name != "ledger" || tok.Seq <= 0 {
			t.Fatalf("decode(%q) = %#v", data, tok)
		}
		var want string
		if tok.Owner == 0 {
			want = strconv.FormatInt(tok.Seq, 10)
		} else {
			want = string(encode(tok))
		}
		if want != string(data) {
			t.Fatalf("decode(%q) = %#v, which is stored as %q", data, tok, want)
		}
		if tok.Owner != 0 && tok.Validate() != nil {
			t.Fatalf("decode(%q) = invalid %#v", data, tok)
		}
	})
}

func TestEncodeRoundTrip(t *testing.T) {
	fence := &Fence{lock: "ledger"}
	for _, tok := range []distlock.Token{
		{Name: "ledger", Seq: 1, Owner: 1},
		{Name: "ledger", Seq: 0x200000005, Owner: 0x2000012d32d0000},
		{Name: "ledger", Seq: 1<<63 - 1, Owner: 1<<64 - 1},
	} {
		got, err := fence.decode(encode(tok))
		if err != nil || got != tok {
			t.Errorf("decode(encode(%v)) = %v, %v", tok, got, err)
		}
	}
}
