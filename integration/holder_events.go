package integration

// The parent's side of the lock holder's line protocol
// (internal/holderproto; cmd/internal/lockholder lists its events
// and commands): its events in, its commands out.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/holderproto"
)

// holderEvent is one line of the lockholder's output.
type holderEvent = holderproto.Event

// read turns the holder's stdout into events and its stderr into log
// lines, then reaps the process.
func (h *Holder) read(stdout, stderr io.Reader) {
	var wg sync.WaitGroup
	wg.Go(func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			h.stderr.add(sc.Text())
			h.log.Info("integration: lock holder stderr", "line", sc.Text())
		}
	})
	sc := holderproto.NewScanner(stdout)
	for sc.Scan() {
		e, err := holderproto.ParseEvent(sc.Bytes())
		if err != nil {
			h.stderr.add("stdout: " + sc.Text())
			h.log.Warn("integration: lock holder wrote a line that is not an event", "line", sc.Text())
			continue
		}
		h.handle(e)
	}
	wg.Wait() // both pipes drained: now Wait may close them
	err := h.cmd.Wait()
	h.mu.Lock()
	h.exitErr = err
	h.mu.Unlock()
	h.log.Info("integration: lock holder exited", "status", h.cmd.ProcessState.String())
	close(h.exited)
	h.writeMu.Lock()
	for id, w := range h.writes {
		delete(h.writes, id)
		w.finish(0, h.errorf("write %d: exited without answering (%v)", id, err))
	}
	h.writeMu.Unlock()
}

func (h *Holder) handle(e holderEvent) {
	if h.handleWait(e) {
		return
	}
	h.log.Info("integration: lock holder event", "event", e.Event, "token", e.Token, "error", e.Error)
	if e.Event == "sent" || e.Event == "written" {
		h.handleWrite(e)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.acquired:
	default: // not acquired yet: only "acquired" or a failure can come
		switch e.Event {
		case "acquired":
			h.token, h.badStart = parseToken(e.Token)
			close(h.acquired)
		case "error":
			h.badStart = errors.New(e.Error)
		}
		return
	}
	switch e.Event {
	case "lost":
		if h.lostErr == "" {
			h.lostErr = e.Error
			if h.lostErr == "" {
				h.lostErr = "lost"
			}
			close(h.lost)
		}
	case "pong", "released", "error":
		h.queue = append(h.queue, e)
		select {
		case h.replies <- struct{}{}:
		default:
		}
	}
}

func parseToken(s string) (distlock.Token, error) {
	t, err := distlock.ParseToken(s)
	if err != nil {
		return t, fmt.Errorf("acquired with a bad token: %w", err)
	}
	return t, nil
}

// request sends cmd and returns its reply. The lockholder answers every
// command exactly once and in order, so replies to commands abandoned when
// their ctx ended are skipped.
func (h *Holder) request(ctx context.Context, cmd string) (holderEvent, error) {
	h.cmdMu.Lock()
	defer h.cmdMu.Unlock()
	if err := h.send(cmd); err != nil {
		return holderEvent{}, h.errorf("%s: %w", cmd, err)
	}
	for {
		h.mu.Lock()
		if len(h.queue) > 0 {
			e := h.queue[0]
			h.queue = h.queue[1:]
			h.mu.Unlock()
			if h.owed > 0 {
				h.owed--
				continue
			}
			return e, nil
		}
		h.mu.Unlock()
		select {
		case <-h.replies:
		case <-h.exited:
			h.mu.Lock()
			n, err := len(h.queue), h.exitErr
			h.mu.Unlock()
			if n == 0 {
				return holderEvent{}, h.errorf("%s: exited without answering (%v)", cmd, err)
			}
		case <-ctx.Done():
			h.owed++
			return holderEvent{}, h.errorf("%s: no answer: %w", cmd, context.Cause(ctx))
		}
	}
}

// send writes one command line to the holder.
func (h *Holder) send(line string) error {
	h.inMu.Lock()
	defer h.inMu.Unlock()
	_, err := io.WriteString(h.stdin, line+"\n")
	return err
}

// Ping asks the holder what it believes: held is true while it has the lock
// and has neither unlocked nor been told the lock is lost; lost is true
// once it has been told (and Lost is closed by then).
func (h *Holder) Ping(ctx context.Context) (held, lost bool, err error) {
	e, err := h.request(ctx, "ping")
	if err != nil {
		return false, false, err
	}
	if e.Event != "pong" {
		return false, false, h.errorf("ping: %s %s", e.Event, e.Error)
	}
	return e.IsHeld(), e.IsLost(), nil
}

// Lost returns a channel closed when the holder reports that the lock is
// lost (see LostError for why).
func (h *Holder) Lost() <-chan struct{} { return h.lost }

// LostError returns why the holder lost the lock, "" while it has not.
func (h *Holder) LostError() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lostErr
}

// Unlock makes the holder unlock. The error wraps distlock.ErrLost when the
// holder had lost the lock (Unlock then deleted nothing of a successor's:
// the holder's delete is guarded by its own key's create revision).
func (h *Holder) Unlock(ctx context.Context) error {
	e, err := h.request(ctx, "unlock")
	switch {
	case err != nil:
		return err
	case e.Event != "released":
		return h.errorf("unlock: %s %s", e.Event, e.Error)
	case e.IsLost():
		return h.errorf("unlock: %w: %s", distlock.ErrLost, e.Error)
	case e.Error != "":
		return h.errorf("unlock: %s", e.Error)
	}
	return nil
}

// tail keeps the last lines written to it, for error messages.
type tail struct {
	mu    sync.Mutex
	lines []string
}

const tailLines = 50

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > tailLines {
		t.lines = t.lines[len(t.lines)-tailLines:]
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}
