package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/cmd/internal/backend"
)

// showProgress shows, on stderr when it is a terminal, one line that says
// where this process waits for lock name: its place in the queue, who
// holds the lock and for how long, and how long it has waited. The line
// is redrawn when the queue changes (the store's watch, as status --watch)
// and every second; stop clears it. holder is this process's entry value,
// by which it finds its own entry. Off a terminal it shows nothing.
func showProgress(b *backend.Client, name, holder string, stderr io.Writer) (stop func()) {
	if !isTerminal(stderr) {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	var (
		mu   sync.Mutex
		last []distlock.QueueEntry
		draw = func() {
			fmt.Fprintf(stderr, "\r\x1b[K%s", progressLine(name, holder, last, start, time.Now()))
		}
		wg sync.WaitGroup
	)
	wg.Go(func() {
		// A watch that fails only costs the display its updates.
		_ = b.WatchQueue(ctx, name, func(q []distlock.QueueEntry) error {
			mu.Lock()
			defer mu.Unlock()
			last = q
			draw()
			return nil
		})
	})
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

// progressLine is the waiting line for queue q at now.
func progressLine(name, holder string, q []distlock.QueueEntry, start, now time.Time) string {
	waited := now.Sub(start).Truncate(time.Second)
	pos := -1
	for i, e := range q {
		if e.Holder == holder {
			pos = i
			break
		}
	}
	if pos < 0 {
		return fmt.Sprintf("waiting for lock %s: joining the queue; waited %v", name, waited)
	}
	line := fmt.Sprintf("waiting for lock %s: position %d of %d", name, pos+1, len(q))
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
	return fmt.Sprintf("%s; waited %v", line, waited)
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
