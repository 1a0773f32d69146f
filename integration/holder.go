package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
)

// HolderSpec says which lock a Holder takes, and where.
type HolderSpec struct {
	// Backend is the lock service: "etcd" (the default, an etcdlock
	// Mutex) or "zk" (a zklock Mutex).
	Backend string
	// Endpoints are the service's client endpoints: EtcdCluster.Endpoints()
	// for etcd, ZooKeeperEnsemble.Addrs() for zk.
	Endpoints []string
	// Lock is the lock's name.
	Lock string
	// TTL is the etcd session TTL (default etcdlock.MinTTL, 2s), or the
	// ZooKeeper session timeout the holder asks for (default 4s; the
	// servers may negotiate it into their bounds). A holder stopped for
	// longer loses its lock on the server.
	TTL time.Duration
	// Prefix is the key prefix of the locks (default: the backend's).
	Prefix string
	// Logger logs the holder's steps, events and stderr (silent if nil).
	Logger *slog.Logger
	// TLS, for an etcd cluster started WithTLS, is its EtcdCluster.TLS:
	// the holder trusts its CA and presents the good client certificate.
	TLS *TLSFiles
}

// Holder is a lock holder in a process of its own (the lockholder command):
// a real process that a test can stop with SIGSTOP, like a long GC pause,
// and continue, to watch what a holder that slept past its TTL believes
// when it wakes up.
type Holder struct {
	spec   HolderSpec
	log    *slog.Logger
	cmd    *exec.Cmd
	pid    int
	stdin  io.WriteCloser
	stderr tail

	acquired chan struct{} // closed by the "acquired" event
	lost     chan struct{} // closed by the "lost" event
	replies  chan struct{} // signalled when a reply is queued
	exited   chan struct{} // closed when the process has exited and been reaped

	mu       sync.Mutex
	token    distlock.Token
	badStart error         // an error event, or a bad token, before "acquired"
	lostErr  string        // the "lost" event's error
	queue    []holderEvent // replies not yet taken by a command
	exitErr  error

	cmdMu sync.Mutex // one command at a time
	owed  int        // replies still to come for abandoned commands; cmdMu
	inMu  sync.Mutex // one line at a time to stdin

	writeMu sync.Mutex
	writeID int64                  // the last write's id; writeMu
	writes  map[int64]*HolderWrite // writes in flight; writeMu

	closeOnce sync.Once
	closeErr  error
}

// holderEvent is one line of the lockholder's output.
type holderEvent struct {
	Event string `json:"event"`
	Token string `json:"token"`
	PID   int    `json:"pid"`
	Held  bool   `json:"held"`
	Lost  bool   `json:"lost"`
	Error string `json:"error"`
	Cause string `json:"cause"`

	ID     int64  `json:"id"`
	Status int    `json:"status"`
	Stale  bool   `json:"stale"`
	Fork   bool   `json:"fork"`
	Newest string `json:"newest"`
}

// holderCloseTimeout is how long Close waits for the holder to exit on its
// own (unlock, close its session) before it kills it.
const holderCloseTimeout = 15 * time.Second

// NewHolder starts a holder for a test, fails the test if it cannot
// acquire within a minute, and closes it when the test ends.
func NewHolder(t testing.TB, spec HolderSpec) *Holder {
	t.Helper()
	if spec.Logger == nil {
		spec.Logger = testLogger(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := StartHolder(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Error(err)
		}
	})
	return h
}

// StartHolder builds and starts the lockholder command and waits until it
// holds the lock. It fails if the process reports an error or exits first,
// or when ctx ends (the process is then closed). The process outlives ctx:
// Close ends it.
func StartHolder(ctx context.Context, spec HolderSpec) (*Holder, error) {
	if spec.Backend == "" {
		spec.Backend = "etcd"
	}
	if spec.Logger == nil {
		spec.Logger = slog.New(slog.DiscardHandler)
	}
	bin, err := buildBinary(ctx, "integration/internal/lockholder")
	if err != nil {
		return nil, err
	}
	args := []string{"-backend", spec.Backend, "-endpoints", strings.Join(spec.Endpoints, ","), "-lock", spec.Lock}
	if spec.TTL > 0 {
		args = append(args, "-ttl", spec.TTL.String())
	}
	if spec.Prefix != "" {
		args = append(args, "-prefix", spec.Prefix)
	}
	if spec.TLS != nil {
		args = append(args, "-cacert", spec.TLS.CA, "-cert", spec.TLS.Cert, "-key", spec.TLS.Key)
	}
	cmd := exec.Command(bin, args...)
	// Its own process group, so that Pause stops every thread; and killed
	// with the test process, so that an interrupted run leaves no holder.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("integration: start lock holder: %w", err)
	}
	h := &Holder{
		spec:     spec,
		cmd:      cmd,
		pid:      cmd.Process.Pid,
		stdin:    stdin,
		acquired: make(chan struct{}),
		lost:     make(chan struct{}),
		replies:  make(chan struct{}, 1),
		exited:   make(chan struct{}),
		writes:   map[int64]*HolderWrite{},
	}
	h.log = spec.Logger.With("holder", h.pid, "lock", spec.Lock)
	h.log.Info("integration: lock holder started", "argv", strings.Join(append([]string{filepath.Base(bin)}, args...), " "))
	go h.read(stdout, stderr)

	select {
	case <-h.acquired:
		h.mu.Lock()
		err := h.badStart
		h.mu.Unlock()
		if err == nil {
			return h, nil
		}
		h.Close()
		return nil, h.errorf("start: %w", err)
	case <-h.exited:
		h.mu.Lock()
		err := errors.Join(h.badStart, h.exitErr)
		h.mu.Unlock()
		return nil, h.errorf("start: exited before acquiring: %w", err)
	case <-ctx.Done():
		h.Close()
		return nil, h.errorf("start: not acquired: %w", context.Cause(ctx))
	}
}

// errorf returns an error naming the holder, with the end of its stderr.
func (h *Holder) errorf(format string, args ...any) error {
	err := fmt.Errorf("integration: lock holder %d (%s): "+format, append([]any{h.pid, h.spec.Lock}, args...)...)
	if s := h.stderr.String(); s != "" {
		err = fmt.Errorf("%w\n--- holder stderr:\n%s", err, s)
	}
	return err
}

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
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		var e holderEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Event == "" {
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
	line, err := json.Marshal(struct {
		Cmd   string `json:"cmd"`
		ID    int64  `json:"id"`
		URL   string `json:"url"`
		Entry string `json:"entry"`
	}{"write", w.ID, url, entry})
	if err == nil {
		err = h.send(string(line))
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

// Token returns the fencing token of the holder's acquisition.
func (h *Holder) Token() distlock.Token {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.token
}

// PID returns the holder's process ID (also its process group's).
func (h *Holder) PID() int { return h.pid }

// Pause stops the holder with SIGSTOP, like a long GC pause: it keeps its
// connections but runs no code, timers included. Pause returns once every
// thread of the process is stopped.
func (h *Holder) Pause() error {
	if err := h.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The kernel tells a parent about a stop only through wait, which
	// exec.Cmd owns: read the threads' states instead.
	if err := poll(ctx, time.Millisecond, func(context.Context) error { return h.stopped() }); err != nil {
		return h.errorf("pause: %w", err)
	}
	return nil
}

// stopped returns nil when every thread of the holder is stopped.
func (h *Holder) stopped() error {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", h.pid))
	if err != nil || len(tasks) == 0 {
		return fmt.Errorf("no threads of %d in /proc: %v", h.pid, err)
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		// "pid (comm) S ...": the state follows the last ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) {
			return fmt.Errorf("%s: cannot parse %q", f, b)
		}
		if s := b[i+2]; s != 'T' {
			return fmt.Errorf("%s: state %c", f, s)
		}
	}
	return nil
}

// Resume continues a paused holder with SIGCONT. Its timers that expired
// during the pause fire at once.
func (h *Holder) Resume() error { return h.signal(syscall.SIGCONT) }

func (h *Holder) signal(sig syscall.Signal) error {
	select {
	case <-h.exited:
		return h.errorf("%v: the process has exited", sig)
	default:
	}
	h.log.Info("integration: signal lock holder", "signal", sig.String())
	if err := syscall.Kill(-h.pid, sig); err != nil {
		return h.errorf("%v: %w", sig, err)
	}
	return nil
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
	return e.Held, e.Lost, nil
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
	case e.Lost:
		return h.errorf("unlock: %w: %s", distlock.ErrLost, e.Error)
	case e.Error != "":
		return h.errorf("unlock: %s", e.Error)
	}
	return nil
}

// Close ends the holder: it continues it if paused, closes its stdin (the
// holder then unlocks, best effort, closes its session and exits), and
// kills it if it has not exited within holderCloseTimeout. It returns an
// error only if the holder had to be killed or would not die. Calling
// Close again returns the same result.
func (h *Holder) Close() error {
	h.closeOnce.Do(func() { h.closeErr = h.close() })
	return h.closeErr
}

func (h *Holder) close() error {
	select {
	case <-h.exited:
		return nil
	default:
	}
	syscall.Kill(-h.pid, syscall.SIGCONT) // a paused holder could not exit
	h.stdin.Close()
	timer := time.NewTimer(holderCloseTimeout)
	defer timer.Stop()
	select {
	case <-h.exited:
		return nil
	case <-timer.C:
	}
	syscall.Kill(-h.pid, syscall.SIGKILL)
	timer.Reset(30 * time.Second)
	select {
	case <-h.exited:
		return h.errorf("did not exit within %v of its stdin closing; killed", holderCloseTimeout)
	case <-timer.C:
		return h.errorf("did not exit after SIGKILL")
	}
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
