package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/internal/holderproto"
)

// HolderWrite is a write a Holder sends to a fenced HTTP resource.
type HolderWrite struct {
	// ID numbers the holder's writes, from 1.
	ID int64

	sentOnce sync.Once
	sent     chan struct{}
	done     chan struct{}
	status   int
	err      error
}

// Sent returns a channel closed once the holder has written the whole
// request to its connection (it may still be held in flight by a proxy).
// It stays open if the request never left.
func (w *HolderWrite) Sent() <-chan struct{} { return w.sent }

// Done returns a channel closed when the write's answer is in (Result).
func (w *HolderWrite) Done() <-chan struct{} { return w.done }

// Result returns the HTTP status (0 if no response came) and the error:
// nil for a 2xx answer; for a 409 that refused the holder's token as
// stale, an error wrapping a *fencing.StaleError, so that
// errors.Is(err, fencing.ErrStale) holds, and for one that refused it as
// a fork (another acquisition with its sequence number was admitted), one
// wrapping a *fencing.ForkError (fencing.ErrFork). Call it after Done is
// closed.
func (w *HolderWrite) Result() (status int, err error) {
	<-w.done
	return w.status, w.err
}

// Wait waits for the write's answer and returns Result, or ctx's error
// if ctx ends first (the write goes on in the holder).
func (w *HolderWrite) Wait(ctx context.Context) (status int, err error) {
	select {
	case <-w.done:
		return w.status, w.err
	case <-ctx.Done():
		return 0, fmt.Errorf("integration: lock holder write %d: no answer: %w", w.ID, context.Cause(ctx))
	}
}

func (w *HolderWrite) finish(status int, err error) {
	w.status, w.err = status, err
	close(w.done)
}

// StartWrite makes the holder POST entry to url, with the token of its
// acquisition (Token) in the Fencing-Token header (fencing.SetToken), and
// returns at once. The holder sends it whatever it believes about the
// lock — after a loss, or after Unlock, too: refusing a stale token is the
// resource's job. Other commands (Ping, Unlock, more writes) go on while
// the write is in flight. The holder gives up on a write after two
// minutes.
func (h *Holder) StartWrite(url, entry string) (*HolderWrite, error) {
	h.writeMu.Lock()
	h.writeID++
	w := &HolderWrite{ID: h.writeID, sent: make(chan struct{}), done: make(chan struct{})}
	select {
	case <-h.exited:
		h.writeMu.Unlock()
		return nil, h.errorf("write: the process has exited")
	default:
	}
	h.writes[w.ID] = w
	h.writeMu.Unlock()
	line, err := holderproto.Command{Cmd: "write", ID: w.ID, URL: url, Entry: entry}.Line()
	if err == nil {
		err = h.send(line)
	}
	if err != nil {
		h.writeMu.Lock()
		delete(h.writes, w.ID)
		h.writeMu.Unlock()
		return nil, h.errorf("write: %w", err)
	}
	return w, nil
}

// Write makes the holder POST entry to url with its token and waits for
// the answer: see StartWrite and HolderWrite.Result. A stale refusal is
// an error wrapping a *fencing.StaleError (errors.Is fencing.ErrStale).
func (h *Holder) Write(ctx context.Context, url, entry string) (status int, err error) {
	w, err := h.StartWrite(url, entry)
	if err != nil {
		return 0, err
	}
	return w.Wait(ctx)
}

// handleWrite files a write's "sent" or "written" event.
func (h *Holder) handleWrite(e holderEvent) {
	h.writeMu.Lock()
	defer h.writeMu.Unlock()
	w, ok := h.writes[e.ID]
	if !ok {
		h.log.Warn("integration: lock holder answered an unknown write", "id", e.ID)
		return
	}
	if e.Event == "sent" {
		w.sentOnce.Do(func() { close(w.sent) })
		return
	}
	delete(h.writes, e.ID)
	var err error
	switch {
	case e.Stale:
		// The same refusal fencing.ResponseError made in the holder.
		t, err1 := distlock.ParseToken(e.Token)
		n, err2 := distlock.ParseToken(e.Newest)
		if err1 != nil || err2 != nil {
			err = fmt.Errorf("integration: lock holder %d: write %d: bad stale refusal %q: %v", h.pid, e.ID, e.Error, errors.Join(err1, err2))
			break
		}
		err = fmt.Errorf("integration: lock holder %d: write %d: %w", h.pid, e.ID, &fencing.StaleError{Resource: staleResource(e.Error), Token: t, Newest: n})
	case e.Fork:
		t, err1 := distlock.ParseToken(e.Token)
		if err1 != nil {
			err = fmt.Errorf("integration: lock holder %d: write %d: bad fork refusal %q: %v", h.pid, e.ID, e.Error, err1)
			break
		}
		n, err2 := distlock.ParseToken(e.Newest)
		if err2 != nil {
			// A sequence number stored before tokens named their owner.
			n = distlock.Token{Name: t.Name, Seq: t.Seq}
		}
		err = fmt.Errorf("integration: lock holder %d: write %d: %w", h.pid, e.ID, &fencing.ForkError{Resource: staleResource(e.Error), Token: t, Admitted: n})
	case e.Error != "":
		err = fmt.Errorf("integration: lock holder %d: write %d (status %d): %s", h.pid, e.ID, e.Status, e.Error)
	}
	w.finish(e.Status, err)
}

// staleResource recovers the Resource of a StaleError from its text
// ("fencing: <resource>: token ...").
func staleResource(msg string) string {
	msg = strings.TrimPrefix(msg, "fencing: ")
	if i := strings.Index(msg, ": token "); i >= 0 {
		return msg[:i]
	}
	return msg
}
