package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/cmd/internal/backend"
)

// errEnough ends a watch that has shown the changes it was asked for.
var errEnough = errors.New("enough changes shown")

// watchStatus is status --watch: the queue now, then after every change,
// until interrupted or changes have been shown (0: no limit).
func watchStatus(conn *connFlags, name, fence string, asJSON bool, changes int, stdout io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	octx, ocancel := context.WithTimeout(ctx, 2*conn.timeout)
	b, err := conn.open(octx)
	ocancel()
	if err != nil {
		return err
	}
	defer b.Close()

	tty := isTerminal(stdout)
	var (
		mu     sync.Mutex
		last   []distlock.QueueEntry
		audit  *fenceStatus  // the fence as read at the last change
		delays []delayStatus // the lock-delays as read at the last change
		shown  = -1          // changes shown; the first snapshot is not one
		redraw = func(q []distlock.QueueEntry) {
			st := newStatus(name, b.Kind(), q, time.Now())
			st.Fence = audit
			st.LockDelays = delays
			switch {
			case asJSON:
				json.NewEncoder(stdout).Encode(st) // one line per snapshot
			case tty:
				fmt.Fprint(stdout, "\x1b[H\x1b[2J") // home, clear
				st.writeText(stdout)
				fmt.Fprintf(stdout, "\nwatching lock %s on %s (updated %s); Ctrl-C to stop\n", name, st.Backend, time.Now().Format(time.TimeOnly))
			default:
				fmt.Fprintf(stdout, "--- %s\n", time.Now().UTC().Format(time.RFC3339))
				st.writeText(stdout)
			}
		}
	)
	if tty && !asJSON {
		// Ages move on between changes: redraw them from the last
		// snapshot every second (the store is not read again).
		go everySecond(ctx, func() {
			mu.Lock()
			if shown >= 0 {
				redraw(last)
			}
			mu.Unlock()
		})
	}
	err = b.WatchQueue(ctx, name, func(q []distlock.QueueEntry) error {
		mu.Lock()
		defer mu.Unlock()
		if shown >= 0 && sameQueue(last, q) {
			return nil // a notification that changed nothing shown (a directory made or removed)
		}
		last = q
		// A lock-delay starts when an entry goes: a change of the queue.
		ds := newStatus(name, b.Kind(), q, time.Now())
		if err := ds.readDelays(ctx, b, time.Now()); err != nil {
			return fmt.Errorf("lock-delays: %w", err)
		}
		delays = ds.LockDelays
		if fence != "" {
			st := newStatus(name, b.Kind(), q, time.Now())
			if err := st.readFence(ctx, b, fence); err != nil {
				return fmt.Errorf("fence %s: %w", fence, err)
			}
			audit = st.Fence
		}
		redraw(q)
		shown++
		if changes > 0 && shown >= changes {
			return errEnough
		}
		return nil
	})
	switch {
	case errors.Is(err, errEnough), ctx.Err() != nil:
		return nil
	case errors.Is(err, backend.ErrFenceKey):
		return usageErr("--fence %q: %s", fence, causeAfter(err, backend.ErrFenceKey))
	case err != nil:
		return exit(exitUnreachable, fmt.Errorf("status --watch of lock %q: %w%s", name, err, b.AuthHint(err)))
	}
	return nil
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// sameQueue reports whether a and b list the same entries in the same
// roles.
func sameQueue(a, b []distlock.QueueEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || a[i].Holding != b[i].Holding || a[i].Holder != b[i].Holder || a[i].Token != b[i].Token || !slices.Equal(a[i].Multi, b[i].Multi) {
			return false
		}
	}
	return true
}
