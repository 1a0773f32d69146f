package backend

import (
	"slices"

	"github.com/distlock/distlock"
)

// SharedEntries compares the queues of several locks (queues[i] is
// names[i]'s, as Inspect reads it) and returns, for each exclusive entry
// whose token's sequence number and owner it shares with an entry of
// another of these queues, the names of the locks it was found in, its
// own included, sorted. Entries that share both were made by one write
// of one session (one etcd create revision, one ZooKeeper czxid): one
// multi-lock acquisition, which may take more locks than these. It is
// what a ZooKeeper client has, where QueueEntry.Multi is never set.
func SharedEntries(names []string, queues [][]distlock.QueueEntry) map[string][]string {
	type acq struct {
		seq   int64
		owner uint64
	}
	in := map[acq][]string{}
	for i, q := range queues {
		for _, e := range q {
			if e.Kind == distlock.Exclusive {
				a := acq{e.Token.Seq, e.Token.Owner}
				if !slices.Contains(in[a], names[i]) {
					in[a] = append(in[a], names[i])
				}
			}
		}
	}
	out := map[string][]string{}
	for _, q := range queues {
		for _, e := range q {
			if ns := in[acq{e.Token.Seq, e.Token.Owner}]; len(ns) > 1 && e.Kind == distlock.Exclusive {
				ns = slices.Clone(ns)
				slices.Sort(ns)
				out[e.Key] = ns
			}
		}
	}
	return out
}
