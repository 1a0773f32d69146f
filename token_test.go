package distlock_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/distlock/distlock"
)

func TestValidateName(t *testing.T) {
	long := strings.Repeat("a", distlock.MaxNameLen)
	tests := []struct {
		name string
		ok   bool
		why  string // substring the error message must contain
	}{
		{name: "a", ok: true},
		{name: "reports/daily", ok: true},
		{name: "ledger.v2", ok: true},
		{name: "tenant-42/billing", ok: true},
		{name: "A_b-9.c/x/Y/z", ok: true},
		{name: "...", ok: true},
		{name: "a/.b/..c/-/_", ok: true},
		{name: long, ok: true},
		{name: strings.Repeat("ab/", 85) + "a", ok: true}, // 256 bytes

		{name: "", why: "empty"},
		{name: long + "a", why: "longer than 256 bytes"},
		{name: "/a", why: "leading or trailing '/'"},
		{name: "a/", why: "leading or trailing '/'"},
		{name: "/", why: "leading or trailing '/'"},
		{name: "a//b", why: "empty segment"},
		{name: ".", why: `segment "."`},
		{name: "..", why: `segment ".."`},
		{name: "a/../b", why: `segment ".."`},
		{name: "a/./b", why: `segment "."`},
		{name: "a/..", why: `segment ".."`},
		{name: "a@b", why: `character '@' at segment "a@b"`},
		{name: "x/@1", why: `character '@' at segment "@1"`},
		{name: "a b", why: `character ' '`},
		{name: " a", why: `character ' '`},
		{name: "a\tb", why: `character '\t'`},
		{name: "a\x00", why: `character '\x00'`},
		{name: "a\\b", why: `character '\\'`},
		{name: "a:b", why: `character ':'`},
		{name: "café", why: `at segment "café"`},
		{name: "ключ/x", why: `at segment "ключ"`},
		{name: "a/b\n", why: `character '\n'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := distlock.ValidateName(tt.name)
			if tt.ok {
				if err != nil {
					t.Fatalf("ValidateName(%q) = %v, want nil", tt.name, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidateName(%q) = nil, want error containing %q", tt.name, tt.why)
			}
			if !errors.Is(err, distlock.ErrInvalidName) {
				t.Errorf("ValidateName(%q) = %v, does not match ErrInvalidName", tt.name, err)
			}
			var le *distlock.LockError
			if !errors.As(err, &le) {
				t.Fatalf("ValidateName(%q) = %v, not a *LockError", tt.name, err)
			}
			if le.Name != tt.name || le.Op != "validate" {
				t.Errorf("LockError{Name: %q, Op: %q}, want {%q, %q}", le.Name, le.Op, tt.name, "validate")
			}
			if !strings.Contains(err.Error(), tt.why) {
				t.Errorf("ValidateName(%q) = %q, want it to mention %q", tt.name, err, tt.why)
			}
		})
	}
}

func TestTokenStringParseRoundTrip(t *testing.T) {
	tests := []struct {
		tok  distlock.Token
		text string
	}{
		{distlock.Token{Name: "a", Seq: 1, Owner: 1}, "a@1.1"},
		{distlock.Token{Name: "reports/daily", Seq: 1042, Owner: 0x694d7f0c8a1b2c3d}, "reports/daily@1042.694d7f0c8a1b2c3d"},
		{distlock.Token{Name: "ledger.v2", Seq: 10, Owner: 0xa}, "ledger.v2@10.a"},
		{distlock.Token{Name: "tenant-42/billing", Seq: math.MaxInt64, Owner: math.MaxUint64}, "tenant-42/billing@9223372036854775807.ffffffffffffffff"},
		// A ZooKeeper session ID of a server with id >= 128 is negative as
		// an int64; the owner is its bits.
		{distlock.Token{Name: "z", Seq: 0x100000002, Owner: 0x8100017d2c5a0000}, "z@4294967298.8100017d2c5a0000"},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			if got := tt.tok.String(); got != tt.text {
				t.Errorf("String() = %q, want %q", got, tt.text)
			}
			got, err := distlock.ParseToken(tt.text)
			if err != nil {
				t.Fatalf("ParseToken(%q) = %v", tt.text, err)
			}
			if got != tt.tok {
				t.Errorf("ParseToken(%q) = %#v, want %#v", tt.text, got, tt.tok)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate() = %v", err)
			}
			if got.IsZero() {
				t.Errorf("IsZero() = true")
			}
		})
	}
}

func TestParseTokenRejects(t *testing.T) {
	tests := []struct {
		in  string
		why string
	}{
		{"", `want "name@seq.owner"`},
		{"abc", `want "name@seq.owner"`},
		{"abc.1", `want "name@seq.owner"`},
		{"@5.1", "invalid lock name: empty"},
		// The form before tokens named their owner.
		{"a@5", `no owner`},
		{"reports/daily@1042", `"name@seq" of distlock before`},
		{"a@.1", `sequence ""`},
		{"a@0.1", `sequence "0"`},
		{"a@-3.1", `sequence "-3"`},
		{"a@+3.1", `sequence "+3"`},
		{"a@007.1", `sequence "007"`},
		{"a@1x.1", `sequence "1x"`},
		{"a@ 1.1", `sequence " 1"`},
		{"a@1 .1", `sequence "1 "`},
		{"a@99999999999999999999.1", `sequence "99999999999999999999"`},
		{"a@9223372036854775808.1", `sequence "9223372036854775808"`},
		{"a@1.", `owner ""`},
		{"a@1.0", `owner "0"`},
		{"a@1.00", `owner "00"`},
		{"a@1.01", `owner "01"`},
		{"a@1.A", `owner "A"`},
		{"a@1.694D7F0C8A1B2C3D", `owner "694D7F0C8A1B2C3D"`},
		{"a@1.0x1f", `owner "0x1f"`},
		{"a@1.g", `owner "g"`},
		{"a@1.-1", `owner "-1"`},
		{"a@1.+1", `owner "+1"`},
		{"a@1. 1", `owner " 1"`},
		{"a@1.1 ", `owner "1 "`},
		{"a@1.1.2", `owner "1.2"`},
		{"a@1..2", `owner ".2"`},
		{"a@1.10000000000000000", `owner "10000000000000000"`},
		{"a@1.fffffffffffffffff", `owner "fffffffffffffffff"`},
		{"a b@3.1", "character ' '"},
		{"a@b@3.1", "character '@'"},
		{"/a@3.1", "leading or trailing '/'"},
		{"a/@3.1", "leading or trailing '/'"},
		{"..@3.1", `segment ".."`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			tok, err := distlock.ParseToken(tt.in)
			if err == nil {
				t.Fatalf("ParseToken(%q) = %#v, nil; want error", tt.in, tok)
			}
			if !errors.Is(err, distlock.ErrInvalidToken) {
				t.Errorf("ParseToken(%q) = %v, does not match ErrInvalidToken", tt.in, err)
			}
			if tok != (distlock.Token{}) {
				t.Errorf("ParseToken(%q) returned non-zero token %#v with error", tt.in, tok)
			}
			if !strings.Contains(err.Error(), tt.why) {
				t.Errorf("ParseToken(%q) = %q, want it to mention %q", tt.in, err, tt.why)
			}
		})
	}
}

func TestTokenValidate(t *testing.T) {
	tests := []struct {
		tok     distlock.Token
		ok      bool
		badName bool
		why     string
	}{
		{distlock.Token{Name: "a", Seq: 1, Owner: 1}, true, false, ""},
		{distlock.Token{}, false, true, "empty"},
		{distlock.Token{Name: "a", Seq: 0, Owner: 1}, false, false, "not positive"},
		{distlock.Token{Name: "a", Seq: -1, Owner: 1}, false, false, "not positive"},
		{distlock.Token{Name: "a", Seq: 1}, false, false, "no owner"},
		{distlock.Token{Name: "a@b", Seq: 1, Owner: 1}, false, true, "'@'"},
		{distlock.Token{Name: "a//b", Seq: 1, Owner: 1}, false, true, "empty segment"},
	}
	for _, tt := range tests {
		err := tt.tok.Validate()
		if tt.ok {
			if err != nil {
				t.Errorf("%#v.Validate() = %v, want nil", tt.tok, err)
			}
			continue
		}
		if !errors.Is(err, distlock.ErrInvalidToken) {
			t.Errorf("%#v.Validate() = %v, want ErrInvalidToken", tt.tok, err)
		}
		if got := errors.Is(err, distlock.ErrInvalidName); got != tt.badName {
			t.Errorf("%#v.Validate() = %v, matches ErrInvalidName = %v, want %v", tt.tok, err, got, tt.badName)
		}
		if err != nil && !strings.Contains(err.Error(), tt.why) {
			t.Errorf("%#v.Validate() = %v, want it to mention %q", tt.tok, err, tt.why)
		}
	}
	if !(distlock.Token{}).IsZero() {
		t.Error("Token{}.IsZero() = false")
	}
}

func TestTokenCompare(t *testing.T) {
	a1 := distlock.Token{Name: "a", Seq: 1, Owner: 7}
	a2 := distlock.Token{Name: "a", Seq: 2, Owner: 7}
	a9 := distlock.Token{Name: "a", Seq: 9, Owner: 8}
	b5 := distlock.Token{Name: "b", Seq: 5, Owner: 7}
	ab1 := distlock.Token{Name: "a/b", Seq: 1, Owner: 7}
	a2x := distlock.Token{Name: "a", Seq: 2, Owner: 0xbeef} // a fork of a2
	tests := []struct {
		t, u         distlock.Token
		cmp          int
		err          error
		newer, older bool
	}{
		{a1, a2, -1, nil, false, true},
		{a2, a1, 1, nil, true, false},
		{a9, a2, 1, nil, true, false}, // numeric, not lexical
		{a2, a9, -1, nil, false, true},
		{a2, a2, 0, nil, false, false},
		{a1, b5, 0, distlock.ErrInvalidToken, false, false},
		{b5, a1, 0, distlock.ErrInvalidToken, false, false},
		{a1, ab1, 0, distlock.ErrInvalidToken, false, false},
		{a2, a2x, 0, distlock.ErrTokenFork, false, false},
		{a2x, a2, 0, distlock.ErrTokenFork, false, false},
		{a2x, a1, 1, nil, true, false}, // only equal Seqs fork
		{a2x, a9, -1, nil, false, true},
	}
	for _, tt := range tests {
		c, err := tt.t.Compare(tt.u)
		if tt.err != nil {
			if err == nil || !errors.Is(err, tt.err) {
				t.Errorf("%v.Compare(%v) = %d, %v; want %v", tt.t, tt.u, c, err, tt.err)
			}
		} else if err != nil || c != tt.cmp {
			t.Errorf("%v.Compare(%v) = %d, %v; want %d, nil", tt.t, tt.u, c, err, tt.cmp)
		}
		if got := tt.t.Newer(tt.u); got != tt.newer {
			t.Errorf("%v.Newer(%v) = %v, want %v", tt.t, tt.u, got, tt.newer)
		}
		if got := tt.t.Older(tt.u); got != tt.older {
			t.Errorf("%v.Older(%v) = %v, want %v", tt.t, tt.u, got, tt.older)
		}
	}
	// The fork error names both tokens.
	_, err := a2.Compare(a2x)
	if err == nil || !strings.Contains(err.Error(), a2.String()) || !strings.Contains(err.Error(), a2x.String()) {
		t.Errorf("fork error %v does not name %v and %v", err, a2, a2x)
	}
}

func TestTokenText(t *testing.T) {
	tok := distlock.Token{Name: "reports/daily", Seq: 1042, Owner: 0x694d7f0c8a1b2c3d}
	b, err := tok.MarshalText()
	if err != nil || string(b) != "reports/daily@1042.694d7f0c8a1b2c3d" {
		t.Fatalf("MarshalText() = %q, %v", b, err)
	}
	var back distlock.Token
	if err := back.UnmarshalText(b); err != nil || back != tok {
		t.Fatalf("UnmarshalText(%q) = %v, token %#v", b, err, back)
	}

	// Invalid tokens do not marshal.
	for _, bad := range []distlock.Token{{}, {Name: "a", Seq: 0, Owner: 1}, {Name: "a b", Seq: 1, Owner: 1}, {Name: "a", Seq: 1}} {
		if b, err := bad.MarshalText(); err == nil || !errors.Is(err, distlock.ErrInvalidToken) {
			t.Errorf("%#v.MarshalText() = %q, %v; want ErrInvalidToken", bad, b, err)
		}
	}

	// A failed UnmarshalText leaves the token untouched.
	keep := distlock.Token{Name: "keep", Seq: 7, Owner: 3}
	for _, bad := range []string{"a@0.1", "keep@7"} {
		if err := keep.UnmarshalText([]byte(bad)); !errors.Is(err, distlock.ErrInvalidToken) {
			t.Errorf("UnmarshalText(%s) = %v, want ErrInvalidToken", bad, err)
		}
	}
	if keep != (distlock.Token{Name: "keep", Seq: 7, Owner: 3}) {
		t.Errorf("failed UnmarshalText changed token to %#v", keep)
	}

	// encoding/json uses the text form, also for map keys.
	type doc struct {
		T distlock.Token         `json:"t"`
		M map[distlock.Token]int `json:"m"`
	}
	in := doc{T: tok, M: map[distlock.Token]int{{Name: "x", Seq: 3, Owner: 0xff}: 1}}
	js, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"t":"reports/daily@1042.694d7f0c8a1b2c3d","m":{"x@3.ff":1}}`; string(js) != want {
		t.Errorf("json = %s, want %s", js, want)
	}
	var out doc
	if err := json.Unmarshal(js, &out); err != nil {
		t.Fatal(err)
	}
	if out.T != tok || out.M[distlock.Token{Name: "x", Seq: 3, Owner: 0xff}] != 1 || len(out.M) != 1 {
		t.Errorf("json round trip = %#v", out)
	}
	for _, bad := range []string{`{"t":"x@01.1"}`, `{"t":"x@1"}`, `{"t":"x@1.0"}`} {
		if err := json.Unmarshal([]byte(bad), &out); !errors.Is(err, distlock.ErrInvalidToken) {
			t.Errorf("json.Unmarshal(%s) = %v, want ErrInvalidToken", bad, err)
		}
	}
	if _, err := json.Marshal(doc{}); !errors.Is(err, distlock.ErrInvalidToken) {
		t.Errorf("json.Marshal(zero token) = %v, want ErrInvalidToken", err)
	}
}

func FuzzParseToken(f *testing.F) {
	for _, s := range []string{
		"", "abc", "@5", "a@", "a@0", "a@-3", "a@+3", "a@007", "a@1x",
		"a@99999999999999999999", "a b@3", "a@1", "reports/daily@1042",
		"a@b@3", "x/y.z_w-v@9223372036854775807", "..@1", "a//b@2", "é@1",
		"a@1.1", "a@1.0", "a@1.01", "a@1.A", "a@1.ffffffffffffffff",
		"a@1.10000000000000000", "reports/daily@1042.694d7f0c8a1b2c3d",
		"a@1.1.1", "a.b@2.c",
	} {
		f.Add(s, int64(1), uint64(1))
	}
	f.Add("reports/daily", int64(math.MaxInt64), uint64(math.MaxUint64))
	f.Add("a", int64(0), uint64(1))
	f.Add("a", int64(5), uint64(0))
	f.Add("a", int64(-5), uint64(7))
	f.Add("a", int64(math.MinInt64), uint64(1<<63))

	f.Fuzz(func(t *testing.T, s string, seq int64, owner uint64) {
		// Parsing: a successful parse is the unique text form of a valid token.
		tok, err := distlock.ParseToken(s)
		if err != nil {
			if !errors.Is(err, distlock.ErrInvalidToken) {
				t.Fatalf("ParseToken(%q) = %v, does not match ErrInvalidToken", s, err)
			}
			if tok != (distlock.Token{}) {
				t.Fatalf("ParseToken(%q) = %#v with error %v", s, tok, err)
			}
		} else {
			if got := tok.String(); got != s {
				t.Fatalf("ParseToken(%q).String() = %q", s, got)
			}
			if err := tok.Validate(); err != nil {
				t.Fatalf("ParseToken(%q) = %#v, Validate() = %v", s, tok, err)
			}
		}

		// Formatting: every valid token survives String and ParseToken,
		// and no other token has its text.
		tok = distlock.Token{Name: s, Seq: seq, Owner: owner}
		if tok.Validate() != nil {
			if _, err := tok.MarshalText(); err == nil {
				t.Fatalf("%#v is invalid, MarshalText succeeded", tok)
			}
			return
		}
		back, err := distlock.ParseToken(tok.String())
		if err != nil || back != tok {
			t.Fatalf("ParseToken(%q) = %#v, %v; want %#v", tok.String(), back, err, tok)
		}
		b, err := tok.MarshalText()
		if err != nil {
			t.Fatalf("%#v.MarshalText() = %v", tok, err)
		}
		var u distlock.Token
		if err := u.UnmarshalText(b); err != nil || u != tok {
			t.Fatalf("UnmarshalText(%q) = %#v, %v; want %#v", b, u, err, tok)
		}
		// Compare is total on one lock's tokens except for forks.
		other := distlock.Token{Name: s, Seq: seq, Owner: owner ^ 1}
		if other.Owner != 0 {
			if _, err := tok.Compare(other); !errors.Is(err, distlock.ErrTokenFork) {
				t.Fatalf("%v.Compare(%v) = %v, want ErrTokenFork", tok, other, err)
			}
		}
		if c, err := tok.Compare(tok); c != 0 || err != nil {
			t.Fatalf("%v.Compare(itself) = %d, %v", tok, c, err)
		}
	})
}
