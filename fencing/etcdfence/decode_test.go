package etcdfence

import (
	"fmt"
	"testing"

	"github.com/distlock/distlock"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// FuzzDecode: a stored value decodes only if it is exactly what encode
// writes for the decoded token, or the 20 digits alone that earlier
// versions wrote (owner 0): one form per stored token, so that etcd's
// byte-wise comparisons of values mean what the fence assumes.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"00000000000000000005", "00000000000000000005.694d7f0c8a1b2c3d", "00000000000000000005.0000000000000000",
		"00000000000000000005.694D7F0C8A1B2C3D", "0000000000000000005.694d7f0c8a1b2c3d", "5", "",
		"09223372036854775807.ffffffffffffffff", "-0000000000000000005", "+0000000000000000005",
	} {
		f.Add([]byte(s))
	}
	fence := &Fence{lock: "ledger", key: "/k"}
	f.Fuzz(func(t *testing.T, v []byte) {
		tok, err := fence.decode([]*mvccpb.KeyValue{{Value: v}})
		if err != nil {
			return
		}
		if tok.Name != "ledger" || tok.Seq <= 0 {
			t.Fatalf("decode(%q) = %#v", v, tok)
		}
		want := encodeSeq(tok.Seq)
		if tok.Owner != 0 {
			want = encode(tok)
		}
		if want != string(v) {
			t.Fatalf("decode(%q) = %#v, which is stored as %q", v, tok, want)
		}
	})
}

// TestEncodeOrder: byte order of stored values is the fence's order: by
// sequence number, whatever the owners, and a value is below the padded
// number of every larger sequence number (the Txn's "<" test).
func TestEncodeOrder(t *testing.T) {
	seqs := []int64{1, 9, 10, 99, 100, 1<<32 + 5, 1<<63 - 1}
	owners := []uint64{1, 0xf, 1<<64 - 1}
	for i, a := range seqs {
		for _, oa := range owners {
			va := encode(distlock.Token{Name: "l", Seq: a, Owner: oa})
			for _, b := range seqs[i+1:] {
				if !(va < encodeSeq(b)) {
					t.Errorf("%q is not below %q", va, encodeSeq(b))
				}
				if encodeSeq(a) >= encodeSeq(b) {
					t.Errorf("%q is not below %q", encodeSeq(a), encodeSeq(b))
				}
			}
			if !(va >= encodeSeq(a)) {
				t.Errorf("%q is below its own number %q", va, encodeSeq(a))
			}
		}
	}
	if got := encode(distlock.Token{Name: "l", Seq: 5, Owner: 0xab}); got != fmt.Sprintf("%020d.%016x", 5, 0xab) {
		t.Errorf("encode = %q", got)
	}
}
