// Package holderproto is the line protocol between a program and a child
// process that holds a distlock lock for it, so that the program can stop
// the child for real (SIGSTOP) and watch what a paused holder does: the
// child writes one Event per line on its stdout, as JSON, and reads one
// Command per line on its stdin, a bare word or JSON. The distlock demo's
// worker and the integration harness's lock holder both speak it; each
// uses the events and commands its own doc lists.
package holderproto

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Event is one line a child writes. Pointers keep false booleans where an
// event carries them (a pong's held) while leaving them out of others.
type Event struct {
	Event string `json:"event"`
	// At is when the child wrote the event, or when what it reports
	// happened (Unix nanoseconds: parent and child share the machine's
	// clock), for timelines.
	At    int64  `json:"at,omitempty"`
	Token string `json:"token,omitempty"`
	PID   int    `json:"pid,omitempty"`
	Held  *bool  `json:"held,omitempty"`
	Lost  *bool  `json:"lost,omitempty"`
	Error string `json:"error,omitempty"`
	// Cause is why the lease ended (its Err), once it has.
	Cause string `json:"cause,omitempty"`
	// Text is what a child asks its parent to write.
	Text string `json:"text,omitempty"`
	// Write answers: the write's id, the HTTP status, and for a stale or
	// forked refusal the token the resource admitted before (newer, or
	// the other acquisition with the same sequence number).
	ID     int64  `json:"id,omitempty"`
	Status int    `json:"status,omitempty"`
	Stale  bool   `json:"stale,omitempty"`
	Fork   bool   `json:"fork,omitempty"`
	Newest string `json:"newest,omitempty"`
}

// Time returns At as a time.
func (e Event) Time() time.Time { return time.Unix(0, e.At) }

// IsHeld reports whether the event says held (false when it says nothing).
func (e Event) IsHeld() bool { return e.Held != nil && *e.Held }

// IsLost reports whether the event says lost (false when it says nothing).
func (e Event) IsLost() bool { return e.Lost != nil && *e.Lost }

// Bool returns a pointer to b, for Held and Lost.
func Bool(b bool) *bool { return &b }

// Writer writes events, one per line. It is safe for concurrent use.
type Writer struct {
	mu  sync.Mutex
	enc *json.Encoder
}

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer { return &Writer{enc: json.NewEncoder(w)} }

// Emit writes e, with At set to now unless e has one.
func (w *Writer) Emit(e Event) error {
	if e.At == 0 {
		e.At = time.Now().UnixNano()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.enc.Encode(e)
}

// ParseEvent decodes one line of a child's output.
func ParseEvent(line []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(line, &e); err != nil {
		return Event{}, err
	}
	if e.Event == "" {
		return Event{}, fmt.Errorf("no event in %q", line)
	}
	return e, nil
}

// Command is one line a parent writes: a bare word ("ping", "go"), or a
// JSON object for a command with arguments (a write).
type Command struct {
	Cmd   string `json:"cmd"`
	ID    int64  `json:"id,omitempty"`
	URL   string `json:"url,omitempty"`
	Entry string `json:"entry,omitempty"`
}

// Line encodes c as one line (without the newline).
func (c Command) Line() (string, error) {
	if c == (Command{Cmd: c.Cmd}) && c.Cmd != "" && !strings.ContainsAny(c.Cmd, " \t\n{") {
		return c.Cmd, nil
	}
	b, err := json.Marshal(c)
	return string(b), err
}

// ParseCommand decodes one line of a parent's input.
func ParseCommand(line string) (Command, error) {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "{") {
		return Command{Cmd: line}, nil
	}
	var c Command
	if err := json.Unmarshal([]byte(line), &c); err != nil {
		return Command{}, err
	}
	return c, nil
}

// NewScanner returns a line scanner for either side's input, with room
// for long lines (a write's entry).
func NewScanner(r io.Reader) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	return sc
}
