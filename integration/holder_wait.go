package integration

// A waiting holder (HolderSpec.Wait): the lockholder's -waiter events
// ("Waiting events" in cmd/internal/lockholder) and what they tell.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/distlock/distlock"
)

// WaitResult is how a waiting holder's Lock (or Campaign) returned.
type WaitResult struct {
	// Acquired says it returned a lease (a leadership); Token is its
	// token.
	Acquired bool
	Token    distlock.Token
	// Err is the error it returned otherwise, as text.
	Err string
	// Is names the distlock sentinel errors that Err matched in the
	// holder (errors.Is): "ErrSessionExpired", "ErrLost", ...
	Is []string
	// Deadline is the session's client-side deadline as the holder read
	// it right after Lock returned (the one Lock was judged by, or later).
	Deadline time.Time
	// At is when the holder reported the return.
	At time.Time
}

// Matches reports whether the holder found that Err matches target, one
// of distlock's sentinel errors (ErrSessionExpired, ErrSessionClosed,
// ErrLost, ErrEntryGone, ErrReleased, ErrLocked, ErrNotLeader, ErrRevoked,
// ErrHistoryRewound) or context.Canceled or context.DeadlineExceeded.
func (r WaitResult) Matches(target error) bool {
	for _, name := range r.Is {
		if err, ok := waitSentinels[name]; ok && err == target {
			return true
		}
	}
	return false
}

// waitSentinels are the errors a "failed" event's cause may name.
var waitSentinels = map[string]error{
	"ErrSessionExpired":        distlock.ErrSessionExpired,
	"ErrSessionClosed":         distlock.ErrSessionClosed,
	"ErrLost":                  distlock.ErrLost,
	"ErrEntryGone":             distlock.ErrEntryGone,
	"ErrReleased":              distlock.ErrReleased,
	"ErrLocked":                distlock.ErrLocked,
	"ErrNotLeader":             distlock.ErrNotLeader,
	"ErrRevoked":               distlock.ErrRevoked,
	"ErrHistoryRewound":        distlock.ErrHistoryRewound,
	"context.Canceled":         context.Canceled,
	"context.DeadlineExceeded": context.DeadlineExceeded,
}

// waitState is what a waiting holder reported.
type waitState struct {
	enqueued chan struct{} // closed by "enqueued"
	failed   chan struct{} // closed by "failed"
	returned chan struct{} // closed by "failed" or "acquired"
	ended    chan struct{} // closed by "ended"

	mu       sync.Mutex
	owner    string    // the session's ID, as QueueEntry.Owner writes it
	entry    string    // the entry's key or path
	deadline time.Time // the last one reported
	res      WaitResult
	done     bool   // res is set
	endErr   string // the session's Err, once ended
}

func newWaitState() *waitState {
	return &waitState{
		enqueued: make(chan struct{}),
		failed:   make(chan struct{}),
		returned: make(chan struct{}),
		ended:    make(chan struct{}),
	}
}

// result returns res.
func (w *waitState) result() WaitResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.res
}

// handleWait takes a waiting holder's own events, and notes its
// "acquired" (which handle then takes as for every holder). It reports
// whether e is done with.
func (h *Holder) handleWait(e holderEvent) bool {
	if !h.spec.Wait {
		return false
	}
	w := h.wait
	switch e.Event {
	case "session":
		h.log.Info("integration: lock holder event", "event", e.Event, "owner", e.Text)
		w.mu.Lock()
		w.owner = e.Text
		w.mu.Unlock()
		return true
	case "deadline":
		d, err := time.Parse(time.RFC3339Nano, e.Text)
		if err != nil {
			h.log.Warn("integration: lock holder reported a bad deadline", "text", e.Text, "err", err)
			return true
		}
		w.mu.Lock()
		w.deadline = d
		w.mu.Unlock()
		h.log.Debug("integration: lock holder event", "event", e.Event, "deadline", e.Text)
		return true
	case "enqueued":
		h.log.Info("integration: lock holder event", "event", e.Event, "entry", e.Text)
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.entry == "" {
			w.entry = e.Text
			close(w.enqueued)
		}
		return true
	case "ended":
		h.log.Info("integration: lock holder event", "event", e.Event, "error", e.Error)
		w.mu.Lock()
		defer w.mu.Unlock()
		select {
		case <-w.ended:
		default:
			w.endErr = e.Error
			close(w.ended)
		}
		return true
	case "failed", "acquired":
		if e.Event == "failed" {
			h.log.Info("integration: lock holder event", "event", e.Event, "error", e.Error, "is", e.Cause)
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.done {
			return e.Event == "failed"
		}
		w.done = true
		w.res = WaitResult{Deadline: w.deadline, At: e.Time()}
		if e.Event == "acquired" {
			w.res.Acquired = true
			w.res.Token, _ = distlock.ParseToken(e.Token) // handle reports a bad one
		} else {
			w.res.Err = e.Error
			if e.Cause != "" {
				w.res.Is = strings.Split(e.Cause, ",")
			}
			close(w.failed)
		}
		close(w.returned)
		return e.Event == "failed"
	}
	return false
}

// Owner returns the session ID of a waiting holder, in hex, as the
// distlock.QueueEntry.Owner of its entries says it.
func (h *Holder) Owner() string {
	h.wait.mu.Lock()
	defer h.wait.mu.Unlock()
	return h.wait.owner
}

// Entry returns the key (etcd) or path (ZooKeeper) of a waiting holder's
// entry, as the queue listed it.
func (h *Holder) Entry() string {
	h.wait.mu.Lock()
	defer h.wait.mu.Unlock()
	return h.wait.entry
}

// Deadline returns the client-side deadline of a waiting holder's session,
// as last reported. It moves with every confirmed keepalive, reported
// within milliseconds (while the holder runs).
func (h *Holder) Deadline() time.Time {
	h.wait.mu.Lock()
	defer h.wait.mu.Unlock()
	return h.wait.deadline
}

// Returned returns a channel closed when a waiting holder's Lock (or
// Campaign) has returned, acquired or failed; Result then says how.
func (h *Holder) Returned() <-chan struct{} { return h.wait.returned }

// Result waits until a waiting holder's Lock (or Campaign) has returned,
// and says how; it fails when ctx ends or the holder exits first.
func (h *Holder) Result(ctx context.Context) (WaitResult, error) {
	select {
	case <-h.wait.returned:
		return h.wait.result(), nil
	case <-h.exited:
		select {
		case <-h.wait.returned:
			return h.wait.result(), nil
		default:
		}
		h.mu.Lock()
		err := errors.Join(h.badStart, h.exitErr)
		h.mu.Unlock()
		return WaitResult{}, h.errorf("exited before Lock returned: %v", err)
	case <-ctx.Done():
		return WaitResult{}, h.errorf("Lock has not returned: %w", context.Cause(ctx))
	}
}

// SessionEnded returns a channel closed when a waiting holder reports
// that its session ended; SessionErr then says why.
func (h *Holder) SessionEnded() <-chan struct{} { return h.wait.ended }

// SessionErr returns why a waiting holder's session ended, as its Err
// said, or "" while it has not.
func (h *Holder) SessionErr() string {
	h.wait.mu.Lock()
	defer h.wait.mu.Unlock()
	return h.wait.endErr
}
