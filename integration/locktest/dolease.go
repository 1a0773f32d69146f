package locktest

import (
	"context"
	"slices"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
)

// multiDoLease: distlock.DoLease hands fn a multi-lock's Lease, whose
// Tokens (one per name) fence a write across every name at once; Do
// hands fn the first token only. Both leave no entry behind.
func multiDoLease(t *testing.T, b Backend) {
	s := b.Session(t)
	names := []string{"dl/b", "dl/a"}
	m := multi(t, s, names...)
	fa, err := fencing.NewMemory("dl/a")
	if err != nil {
		t.Fatal(err)
	}
	fb, err := fencing.NewMemory("dl/b")
	if err != nil {
		t.Fatal(err)
	}
	wrote := 0
	var tokens []distlock.Token
	err = distlock.DoLease(Ctx(t), m, func(ctx context.Context, l *distlock.Lease) error {
		tokens = l.Tokens()
		wantEntriesEach(t, b, 1, "while DoLease's fn runs", names...)
		return fencing.DoAll(ctx, l.Tokens(), []*fencing.Memory{fb, fa}, func(context.Context) error {
			wrote++
			return nil
		})
	})
	if err != nil || wrote != 1 {
		t.Fatalf("DoLease on a multi-lock: %v (wrote %d)", err, wrote)
	}
	if len(tokens) != 2 || tokens[0].Name != "dl/a" || tokens[1].Name != "dl/b" || tokens[0].Seq != tokens[1].Seq {
		t.Fatalf("DoLease's fn saw tokens %v, want one per name, sorted, one sequence number", tokens)
	}
	if fa.Newest() != tokens[0] || fb.Newest() != tokens[1] {
		t.Fatalf("fences hold %v, %v; want %v", fa.Newest(), fb.Newest(), tokens)
	}
	wantEntriesEach(t, b, 0, "after DoLease", names...)

	var first distlock.Token
	err = distlock.Do(Ctx(t), m, func(_ context.Context, tok distlock.Token) error {
		first = tok
		return nil
	})
	if err != nil || first.Name != "dl/a" || first.Seq <= tokens[0].Seq {
		t.Fatalf("Do on a multi-lock: %v, token %v; want the first name's newer token", err, first)
	}
	if slices.Contains(tokens, first) {
		t.Fatalf("Do's token %v repeats DoLease's", first)
	}
	wantEntriesEach(t, b, 0, "after Do", names...)
}
