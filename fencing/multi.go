package fencing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/distlock/distlock"
)

// ErrUnmatched reports tokens and fences of a write across several locks
// that do not pair up one to one by lock name: a fence whose lock has no
// token among those given, a token of a lock no fence guards, two tokens
// of one lock, or two fences of one lock. It is the caller's mistake, not
// a fence's decision: nothing is admitted or recorded.
var ErrUnmatched = errors.New("fencing tokens and fences do not pair up by lock")

// Match pairs fences with tokens by lock name: locks[i] is the lock of the
// i-th fence, and the i-th token returned is the one of tokens whose Name
// is locks[i]. Every lock must have exactly one token and every token
// exactly one lock (two fences of one lock are refused too); otherwise
// the error wraps ErrUnmatched and names what does not pair up. Match
// looks at names only: each fence still checks its token (Check).
//
// The backends' writes across several locks (DoAll here, and the store
// fences' forms) call it first; a fence written outside this module can
// too.
func Match(locks []string, tokens []distlock.Token) ([]distlock.Token, error) {
	if len(locks) == 0 {
		return nil, fmt.Errorf("fencing: %w: no fences", ErrUnmatched)
	}
	at := make(map[string]int, len(locks))
	for i, l := range locks {
		if j, dup := at[l]; dup {
			return nil, fmt.Errorf("fencing: %w: fences %d and %d both guard with lock %q (one token per lock, one fence per lock)", ErrUnmatched, j, i, l)
		}
		at[l] = i
	}
	paired := make([]distlock.Token, len(locks))
	have := make([]bool, len(locks))
	for _, t := range tokens {
		i, ok := at[t.Name]
		switch {
		case !ok:
			return nil, fmt.Errorf("fencing: %w: token %v: no fence guards with lock %q (fences of %s)", ErrUnmatched, t, t.Name, quoted(locks))
		case have[i]:
			return nil, fmt.Errorf("fencing: %w: two tokens of lock %q: %v and %v", ErrUnmatched, t.Name, paired[i], t)
		}
		paired[i], have[i] = t, true
	}
	for i, ok := range have {
		if !ok {
			return nil, fmt.Errorf("fencing: %w: no token of lock %q, which fence %d guards with (tokens of %s)", ErrUnmatched, locks[i], i, quoted(names(tokens)))
		}
	}
	return paired, nil
}

func names(tokens []distlock.Token) []string {
	ns := make([]string, len(tokens))
	for i, t := range tokens {
		ns[i] = t.Name
	}
	return ns
}

func quoted(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// Refusals returns nil for no refusals, the one refusal alone, or, when
// several fences refused, a *RefusalsError holding each, so that
// errors.Is and errors.As find every one. errs holds one entry per fence
// of the write, nil for a fence that admitted its token. The backends'
// writes across several locks return it: every fence that refused is
// named, in the order the fences were given.
func Refusals(errs []error) error {
	var out []error
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	switch len(out) {
	case 0:
		return nil
	case 1:
		return out[0]
	}
	return &RefusalsError{Tokens: len(errs), Errs: out}
}

// RefusalsError is the refusal of a write across several locks by more
// than one of its fences. Its message is one line that names each refused
// token and why, e.g.
//
//	fencing: 2 of 3 tokens refused: a@5.1f stale (a@7.2e admitted); b@5.1f stale (b@9.2e admitted)
//
// and Unwrap gives every refusal (a *StaleError, *ForkError, ...), so
// errors.Is(err, ErrStale) and errors.As(err, &stale) see through it.
type RefusalsError struct {
	// Tokens is how many tokens the write carried, one per fence.
	Tokens int
	// Errs are the refusals, in the order of the fences that made them.
	Errs []error
}

// Error names every refused token and why, on one line.
func (e *RefusalsError) Error() string {
	parts := make([]string, len(e.Errs))
	for i, err := range e.Errs {
		parts[i] = refusalText(err)
	}
	return fmt.Sprintf("fencing: %d of %d tokens refused: %s", len(e.Errs), e.Tokens, strings.Join(parts, "; "))
}

// Unwrap returns the refusals, for errors.Is and errors.As.
func (e *RefusalsError) Unwrap() []error { return e.Errs }

// refusalText is one refusal as a RefusalsError lists it.
func refusalText(err error) string {
	var stale *StaleError
	var fork *ForkError
	switch {
	case errors.As(err, &stale):
		return fmt.Sprintf("%v stale (%s admitted)", stale.Token, admittedText(stale.Newest))
	case errors.As(err, &fork):
		return fmt.Sprintf("%v forked (%s admitted with the same sequence number)", fork.Token, admittedText(fork.Admitted))
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

// DoAll runs write (if not nil) only if every fence admits its token, the
// one of tokens whose Name is the fence's lock: the write of a holder of
// several locks at once (one acquisition of several names carries one
// token per name, all with one Seq and Owner). It is Memory.Do across
// fences, all or nothing: if any fence refuses (a stale, forked or invalid
// token), no fence records anything and write does not run, and the error
// is that fence's *StaleError or *ForkError (a *RefusalsError holding
// each if several refuse; errors.Is and errors.As find each). Tokens and fences that do not
// pair up one to one by lock name are refused with ErrUnmatched before any
// fence is looked at.
//
// DoAll holds every fence for the whole write, as Do holds one, so no
// other Do or DoAll of those fences runs meanwhile. It takes the fences'
// mutexes in one order, by lock name, whatever order they are given in:
// concurrent DoAlls on overlapping fences wait for each other instead of
// deadlocking. As with Do, the tokens stay admitted even if write then
// fails.
func DoAll(ctx context.Context, tokens []distlock.Token, fences []*Memory, write func(ctx context.Context) error) error {
	locks := make([]string, len(fences))
	for i, m := range fences {
		if m == nil {
			return fmt.Errorf("fencing: do all: %w: fence %d is nil", ErrInvalidArgument, i)
		}
		locks[i] = m.lock
	}
	paired, err := Match(locks, tokens)
	if err != nil {
		return err
	}
	for i, m := range fences {
		if err := Check(m.resource(), m.lock, paired[i]); err != nil {
			m.tel.Record(ctx, paired[i], err)
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Match refused two fences of one lock, so the order is strict: every
	// DoAll takes any two fences it shares with another in the same order.
	order := make([]int, len(fences))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(locks[a], locks[b]) })
	for _, i := range order {
		fences[i].mu.Lock()
		defer fences[i].mu.Unlock()
	}
	errs := make([]error, len(fences))
	for i, m := range fences {
		errs[i] = Compare(m.resource(), paired[i], m.newest)
	}
	if err := Refusals(errs); err != nil {
		for i, m := range fences {
			if errs[i] != nil {
				m.tel.Record(ctx, paired[i], errs[i])
			}
		}
		return err
	}
	for i, m := range fences {
		m.newest = paired[i]
		m.tel.Record(ctx, paired[i], nil)
	}
	if write == nil {
		return nil
	}
	return write(ctx)
}
