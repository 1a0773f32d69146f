package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/cmd/internal/backend"
)

// showProgress shows, on stderr when it is a terminal, one line that says
// where this process waits for lock names[0]: its place in the queue, who
// holds the lock and for how long, and how long it has waited. The line
// is redrawn when the queue changes (the store's watch, as status --watch)
// and every second; stop clears it. holder is this process's entry value,
// by which it finds its own entry. Off a terminal it shows nothing.
//
// For several names (a multi-lock, which waits for them one after the
// other) it follows every name's queue and shows the first name whose
// entry does not hold yet.
func showProgress(b *backend.Client, names []string, holder string, stderr io.Writer) (stop func()) {
	if !isTerminal(stderr) {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	var (
		mu   sync.Mutex
		last = make([][]distlock.QueueEntry, len(names))
		draw = func() {
			line := progressLine(names[0], holder, last[0], start, time.Now())
			if len(names) > 1 {
				line = multiProgressLine(names, holder, last, start, time.Now())
			}
			fmt.Fprintf(stderr, "\r\x1b[K%s", line)
		}
		wg sync.WaitGroup
	)
	for i, name := range names {
		wg.Go(func() {
			// A watch that fails only costs the display its updates.
			_ = b.WatchQueue(ctx, name, func(q []distlock.QueueEntry) error {
				mu.Lock()
				defer mu.Unlock()
				last[i] = q
				draw()
				return nil
			})
		})
	}
	wg.Go(func() {
		everySecond(ctx, func() {
			mu.Lock()
			draw()
			mu.Unlock()
		})
	})
	return func() {
		cancel()
		wg.Wait()
		fmt.Fprint(stderr, "\r\x1b[K")
	}
}

// lockEntries is q without an election's candidates of the same name,
// which a lock's waiters neither wait for nor are held up by.
func lockEntries(q []distlock.QueueEntry) []distlock.QueueEntry {
	return slices.DeleteFunc(slices.Clone(q), func(e distlock.QueueEntry) bool { return e.Kind == distlock.Candidate })
}

// progressLine is the waiting line for queue q at now.
func progressLine(name, holder string, q []distlock.QueueEntry, start, now time.Time) string {
	q = lockEntries(q)
	return fmt.Sprintf("waiting for lock %s: %s; waited %v", name, queuePlace(holder, q, now), now.Sub(start).Truncate(time.Second))
}

// multiProgressLine is the waiting line of a multi-lock of names (sorted),
// queues[i] being names[i]'s: the first name whose entry does not hold
// yet, and where it stands there.
func multiProgressLine(names []string, holder string, queues [][]distlock.QueueEntry, start, now time.Time) string {
	at := "holding them all"
	for i, name := range names {
		queues[i] = lockEntries(queues[i])
		if pos := ownEntry(holder, queues[i]); pos < 0 || !queues[i][pos].Holding {
			at = "lock " + name + " " + queuePlace(holder, queues[i], now)
			break
		}
	}
	return fmt.Sprintf("waiting for locks %s: %s; waited %v", strings.Join(names, "+"), at, now.Sub(start).Truncate(time.Second))
}

// ownEntry is the position in q of the entry whose value is holder, -1 if
// none.
func ownEntry(holder string, q []distlock.QueueEntry) int {
	for i, e := range q {
		if e.Holder == holder {
			return i
		}
	}
	return -1
}

// queuePlace says where the entry whose value is holder stands in q, and
// who holds the lock since when.
func queuePlace(holder string, q []distlock.QueueEntry, now time.Time) string {
	pos := ownEntry(holder, q)
	if pos < 0 {
		return "joining the queue"
	}
	line := fmt.Sprintf("position %d of %d", pos+1, len(q))
	for _, e := range q {
		if !e.Holding {
			continue
		}
		who := e.Holder
		if who == "" {
			who = "owner " + e.Owner
		}
		line += ", held by " + oneLine(who)
		created := e.Created
		if created.IsZero() {
			created = sinceIn(e.Holder)
		}
		if !created.IsZero() {
			line += fmt.Sprintf(" for %v", max(now.Sub(created), 0).Truncate(time.Second))
		}
		break
	}
	return line
}

// everySecond calls f every second until ctx ends: the redraws of a live
// display, whose times move on between the store's changes.
func everySecond(ctx context.Context, f func()) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
