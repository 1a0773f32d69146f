package sqlfence

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
)

// AdmitAll admits one token per fence in the transaction q, which must be
// the transaction of the fenced write: the write of a holder of several
// locks at once (one acquisition of several names carries one token per
// name, all with one Seq and Owner). Each fence takes the token of tokens
// whose Name is its lock, and admits it as Admit does. It returns nil only
// if every fence admitted; otherwise the first refusal (a
// *fencing.StaleError or *fencing.ForkError naming the fence's table and
// resource, or an error wrapping fencing.ErrForeignToken) or database
// error, and the caller must roll q back, which undoes the admissions made
// before it. Tokens and fences that do not pair up one to one by lock
// name are refused with fencing.ErrUnmatched, and invalid tokens as Admit
// refuses them, before the database is touched; so are two fences of one
// table and resource.
//
// The fences are admitted in one fixed order, by table and then resource
// (byte order), whatever order they are given in: on PostgreSQL each
// admission holds its row until q ends, and two transactions that took
// overlapping rows in opposite orders could deadlock (PostgreSQL would
// then abort one). Transactions that fence several resources should all
// go through AdmitAll, so that they all take the rows in this order.
func AdmitAll(ctx context.Context, q Querier, tokens []distlock.Token, fences ...*Fence) error {
	locks := make([]string, len(fences))
	for i, f := range fences {
		if f == nil {
			return fmt.Errorf("sqlfence: admit all: %w: fence %d is nil", fencing.ErrInvalidArgument, i)
		}
		for j, g := range fences[:i] {
			if g.table == f.table && g.resource == f.resource {
				return fmt.Errorf("sqlfence: admit all: %w: fences %d and %d both guard %s", fencing.ErrInvalidArgument, j, i, f.name())
			}
		}
		locks[i] = f.lock
	}
	paired, err := fencing.Match(locks, tokens)
	if err != nil {
		return err
	}
	for i, f := range fences {
		if err := fencing.Check(f.name(), f.lock, paired[i]); err != nil {
			f.obs.Record(ctx, paired[i], err)
			return err
		}
	}
	order := make([]int, len(fences))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(fences[a].table, fences[b].table), cmp.Compare(fences[a].resource, fences[b].resource))
	})
	for _, i := range order {
		if err := fences[i].admit(ctx, q, paired[i]); err != nil {
			// Only the refusing fence decided; the others' admissions
			// are undone by the rollback, and not counted.
			fences[i].obs.Record(ctx, paired[i], err)
			return err
		}
	}
	for i, f := range fences {
		f.obs.Record(ctx, paired[i], nil)
	}
	return nil
}
