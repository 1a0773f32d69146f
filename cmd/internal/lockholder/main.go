// Command lockholder holds one distlock lock in a process of its own, so
// that tests can stop it (SIGSTOP, like a long GC pause), continue it and
// kill it for real. integration.StartHolder runs it.
//
//	lockholder -backend etcd -endpoints http://127.0.0.1:2379 -lock reports/daily [-ttl 2s] [-prefix /distlock/]
//	lockholder -backend zk -endpoints 127.0.0.1:2181,127.0.0.1:2182 -lock reports/daily [-ttl 4s] [-prefix /distlock]
//
// With -permits N it takes a permit of the semaphore of N permits called
// -lock instead of the Mutex (its token is the permit's slot's).
//
// With -election it campaigns in the election called -lock instead, with
// -value as its value (default: its pid) and -priority as its priority
// (distlock.WithPriority): "acquired" then means leading, its token is the
// term's, a deposed leader reports "lost", and "unlock" resigns.
//
// With -backend zk, -ttl is the session timeout asked of ZooKeeper (default
// 4s; the servers may negotiate it into their bounds).
//
// With -waiter it reports its wait too, for tests that stop it while it
// waits (see Waiting events below): its session is made with etcdlock or
// zklock directly (for its client-side deadline), a failed Lock (or
// Campaign) is reported and the process stays, answering commands, until
// it is told to exit. -waiter excludes -permits.
//
// It acquires the lock with Mutex.Lock, then speaks the line protocol of
// internal/holderproto (which the distlock demo's worker speaks too). On
// stdout it writes one JSON object per line, one per event, each with the
// time it was written ("at", Unix nanoseconds, left out below):
//
//	{"event":"acquired","token":"reports/daily@42.694d7f0c8a1b2c3d","pid":1234}
//	{"event":"lost","error":"..."}              the library said the lock is lost
//	{"event":"pong","held":true,"token":"...","lost":false}
//	{"event":"released"}                         after unlock ("error" set if Unlock failed)
//	{"event":"error","error":"..."}              a failure
//
// On stdin it reads one command per line: "ping" (answered by pong),
// "unlock" (answered by released, or by error when nothing is held) and
// "exit". Every ping and unlock gets exactly one answer, in order.
//
// A line that is a JSON object is a write:
//
//	{"cmd":"write","id":7,"url":"http://127.0.0.1:8080/ledger","entry":"..."}
//
// The holder POSTs entry to url with the token of its acquisition in the
// Fencing-Token header — also after it unlocked or lost the lock, since
// refusing that is the resource's job — and answers out of band, tagged
// with the id, so that other commands go on while the request is in
// flight:
//
//	{"event":"sent","id":7}                      the request was written to the connection
//	{"event":"written","id":7,"status":200}      the answer (error set unless 2xx; stale or fork, and newest, set for a 409 stale or forked refusal)
//
// "sent" may be missing (the request never left), "written" never is. "lost" is
// written once, as soon as the process learns of the loss, and always
// before any answer that reflects it. On "exit", stdin EOF, SIGTERM or
// SIGINT it unlocks (best effort), closes its session and exits 0. Setup
// errors, including a failed Lock, are reported as an error event and exit
// 1. Diagnostics (etcdlock's log) go to stderr.
//
// # Waiting events
//
// With -waiter these come too (text carries the value; times are
// RFC 3339 with nanoseconds):
//
//	{"event":"session","text":"694d7f0c8a1b2c3d"}                 the session's ID (etcd lease, ZooKeeper session) in hex, as the queue's entries name their owner, first
//	{"event":"deadline","text":"2026-12-03T18:33:08.123456789Z"}   the session's client-side deadline (Session.Deadline), first when the session is made, then whenever it moves
//	{"event":"enqueued","text":"/distlock/reports/daily/@..."}     an entry of the session (its key or znode path) is in the lock's queue, as the store lists it
//	{"event":"failed","error":"...","cause":"ErrSessionExpired"}    Lock (Campaign) failed; cause names the distlock sentinel errors the error matches (errors.Is), comma-separated
//	{"event":"ended","error":"..."}                                 the session ended (its Err)
//
// The deadline as it is when Lock returns is written (if it moved) before
// "acquired" or "failed", so the last "deadline" before either is the one
// the acquisition was judged by or later. "enqueued" may follow
// "acquired" (the queue is read on a watch of its own). A failed Lock
// does not end the process: it goes on answering ping ("held" false) until
// "exit" or stdin EOF, then closes its session and exits 0.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/cmd/internal/backend"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/internal/holderproto"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
)

// writeTimeout bounds one write, including the time a test holds it in
// flight.
const writeTimeout = 2 * time.Minute

// stepTimeout bounds each request made on behalf of a command or of the
// shutdown.
const stepTimeout = 10 * time.Second

var (
	out = holderproto.NewWriter(os.Stdout)
	log = slog.New(slog.NewTextHandler(os.Stderr, nil))
)

// event is one line of output.
type event = holderproto.Event

func emit(e event) {
	if err := out.Emit(e); err != nil {
		log.Error("lockholder: write event", "event", e.Event, "err", err)
	}
}

func main() { os.Exit(run()) }

func run() int {
	backendFlag := flag.String("backend", "etcd", "lock service: etcd or zk")
	endpoints := flag.String("endpoints", "", "comma-separated endpoints of the lock service (etcd: client URLs; zk: host:port)")
	name := flag.String("lock", "", "name of the lock to hold")
	ttl := flag.Duration("ttl", 0, "session TTL (etcd, default 2s) or session timeout (zk, default 4s)")
	prefix := flag.String("prefix", "", "key prefix of the locks (default: the backend's)")
	permits := flag.Int("permits", 0, "take a permit of a semaphore of this many permits instead of the Mutex")
	elect := flag.Bool("election", false, "campaign in the election called -lock instead of taking the Mutex")
	value := flag.String("value", "", "with -election: the candidate's value (default: the pid)")
	priority := flag.Int("priority", 0, "with -election: the candidate's priority")
	waiter := flag.Bool("waiter", false, "report the wait (enqueued, the session's deadline, a failed Lock without exiting, the session's end)")
	flag.Parse()

	fail := func(err error) int {
		log.Error("lockholder: " + err.Error())
		emit(event{Event: "error", Error: err.Error()})
		return 1
	}
	kind, err := backend.ParseKind(*backendFlag)
	switch {
	case err != nil:
		return fail(err)
	case *endpoints == "":
		return fail(errors.New("-endpoints is required"))
	case *name == "":
		return fail(errors.New("-lock is required"))
	case *elect && *permits > 0:
		return fail(errors.New("-election and -permits exclude each other"))
	case !*elect && (*value != "" || *priority != 0):
		return fail(errors.New("-value and -priority need -election"))
	case *waiter && *permits > 0:
		return fail(errors.New("-waiter and -permits exclude each other"))
	}
	if _, err := distlock.ParseCompat(*compatFlag); err != nil {
		return fail(fmt.Errorf("-compat: %w", err))
	}
	want := what{name: *name, permits: *permits}
	if *elect {
		want.campaign = &campaign{value: cmp.Or(*value, strconv.Itoa(os.Getpid())), priority: *priority}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	holderID := fmt.Sprintf("lockholder:%d", os.Getpid())
	var (
		acquire func(context.Context) result
		cleanup func()
		w       *waitReport // with -waiter
	)
	if *waiter {
		acquire, cleanup, w, err = openWaiter(ctx, kind, strings.Split(*endpoints, ","), want, *ttl, *prefix, holderID)
	} else {
		acquire, cleanup, err = open(ctx, kind, strings.Split(*endpoints, ","), want, *ttl, *prefix, holderID)
	}
	if err != nil {
		return fail(err)
	}
	defer cleanup()
	if w != nil {
		stopReport := w.start(ctx)
		defer stopReport()
	}

	// Commands are read while Lock (or Campaign) waits too, so that stdin
	// EOF ends a holder that never acquires.
	cmds := make(chan string)
	go func() {
		sc := holderproto.NewScanner(os.Stdin)
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); line != "" {
				cmds <- line
			}
		}
		close(cmds)
	}()

	lockCtx, cancelLock := context.WithCancel(ctx)
	defer cancelLock()
	locked := make(chan result, 1)
	go func() { locked <- acquire(lockCtx) }()

	h := &holder{writes: make(chan event)}
	defer func() { h.shutdown(cancelLock, locked) }() // locked as it is then
	for {
		select {
		case r := <-locked:
			locked = nil
			if w != nil {
				w.returned(r.err)
				if r.err != nil {
					continue
				}
			}
			if r.err != nil {
				return fail(r.err)
			}
			h.lease, h.release = r.lease, r.release
			h.done = r.lease.Done()
			emit(event{Event: "acquired", Token: r.lease.Token().String(), PID: os.Getpid()})
		case <-h.done:
			h.noteLost(nil)
		case e := <-h.writes:
			if e.Event == "written" {
				h.noteLost(nil) // a refusal may be the first news of a loss
			}
			emit(e)
		case line, ok := <-cmds:
			if !ok || line == "exit" {
				return 0
			}
			h.command(line)
		case <-ctx.Done():
			return 0
		}
	}
}

// The TLS flags (etcd only), for clusters the harness
// started WithTLS: HolderSpec.TLS passes the cluster's files.
var (
	cacertFlag = flag.String("cacert", "", "etcd: CA certificate that signed the servers' certificates (PEM)")
	certFlag   = flag.String("cert", "", "etcd: client certificate (PEM)")
	keyFlag    = flag.String("key", "", "etcd: client key (PEM)")
)

// compatFlag is the Mutex's compatibility mode (distlock.ParseCompat's
// names; HolderSpec.Compat).
var compatFlag = flag.String("compat", "", "the Mutex's compatibility mode: curator, kazoo, go-zookeeper, etcd, ... (default: none)")

// lockOpts are the Mutex's options, from the flags.
func lockOpts() []distlock.LockOption {
	c, _ := distlock.ParseCompat(*compatFlag) // checked by main
	return []distlock.LockOption{distlock.WithCompat(c)}
}

// what is what the holder takes: the Mutex called name, a permit of the
// semaphore of that name (permits above 0), or the lead of the election of
// that name (campaign set).
type what struct {
	name     string
	permits  int
	campaign *campaign
}

// campaign is an election candidate's value and priority.
type campaign struct {
	value    string
	priority int
}

// open connects and returns how to take w on a session of its own;
// cleanup closes the session and the connection.
func open(ctx context.Context, kind backend.Kind, endpoints []string, w what, ttl time.Duration, prefix, holderID string) (func(context.Context) result, func(), error) {
	tc, err := backend.LoadTLS(*cacertFlag, *certFlag, *keyFlag)
	if err != nil {
		return nil, nil, fmt.Errorf("TLS: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	cli, err := backend.Dial(sctx, backend.Config{Kind: kind, Endpoints: endpoints, TLS: tc, Prefix: prefix, TTL: ttl, DialTimeout: stepTimeout, Logger: log})
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	sess, err := cli.NewSession(sctx, holderID)
	if err != nil {
		cli.Close()
		return nil, nil, err
	}
	cleanup := func() {
		cctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
		defer cancel()
		if err := sess.Close(cctx); err != nil {
			log.Warn("lockholder: close session", "err", err)
		}
		cli.Close()
	}
	if c := w.campaign; c != nil {
		el, err := sess.Election(w.name)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		return func(ctx context.Context) result {
			ld, err := el.Campaign(ctx, c.value, distlock.WithPriority(c.priority))
			if err != nil {
				return result{err: err}
			}
			return result{lease: ld, release: ld.Resign}
		}, cleanup, nil
	}
	var mu distlock.Locker
	if w.permits > 0 {
		mu, err = sess.SemaphoreLocker(w.name, w.permits)
	} else {
		mu, err = sess.Mutex(w.name, lockOpts()...)
	}
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return func(ctx context.Context) result {
		l, err := mu.Lock(ctx)
		if err != nil {
			return result{err: err}
		}
		return result{lease: l, release: l.Unlock}
	}, cleanup, nil
}

// held is what the holder acquired: a Lease, or a Leadership, which has
// the same surface.
type held interface {
	Token() distlock.Token
	Done() <-chan struct{}
	Err() error
}

// result is what Lock (or Campaign) returned, and how to give it up
// (Unlock, or Resign).
type result struct {
	lease   held
	release func(context.Context) error
	err     error
}

// holder is the state of the held lock, used by the main goroutine only.
type holder struct {
	lease    held                        // nil until acquired
	release  func(context.Context) error // lease's Unlock, or Resign
	done     <-chan struct{}             // lease.Done() until the loss is reported or the lease released
	lost     bool                        // "lost" was written
	released bool
	writes   chan event // answers of writes in flight, to be emitted
}

// noteLost writes "lost" once, if the lease says it is lost or err does.
func (h *holder) noteLost(err error) {
	if h.lost || h.lease == nil {
		return
	}
	if err == nil {
		select {
		case <-h.lease.Done():
			err = h.lease.Err()
		default:
		}
	}
	if !errors.Is(err, distlock.ErrLost) {
		return
	}
	h.lost, h.done = true, nil
	log.Info("lockholder: lock lost", "err", err)
	emit(event{Event: "lost", Error: err.Error()})
}

func (h *holder) command(line string) {
	h.noteLost(nil) // so that no answer contradicts an unreported loss
	c, err := holderproto.ParseCommand(line)
	if err != nil || c.Cmd == "write" && c.ID == 0 {
		emit(event{Event: "error", Error: fmt.Sprintf("bad command %q (want a write with an id: %v)", line, err)})
		return
	}
	switch c.Cmd {
	case "write":
		h.write(c)
	case "ping":
		held := h.lease != nil && !h.released && !h.lost
		e := event{Event: "pong", Held: holderproto.Bool(held), Lost: holderproto.Bool(h.lost)}
		if h.lease != nil {
			e.Token = h.lease.Token().String()
			if err := h.lease.Err(); err != nil {
				e.Cause = err.Error()
			}
		}
		emit(e)
	case "unlock":
		if h.lease == nil || h.released {
			emit(event{Event: "error", Error: "unlock: the lock is not held (not acquired yet, or already unlocked)"})
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
		err := h.release(ctx)
		cancel()
		h.released, h.done = true, nil
		h.noteLost(err) // Unlock may be the first to find the entry gone
		e := event{Event: "released"}
		if err != nil {
			e.Error = err.Error()
			e.Lost = holderproto.Bool(h.lost)
		}
		emit(e)
	default:
		emit(event{Event: "error", Error: fmt.Sprintf("unknown command %q (want ping, unlock or exit)", line)})
	}
}

// write starts a write command; its answers come back through h.writes.
func (h *holder) write(c holderproto.Command) {
	if h.lease == nil {
		emit(event{Event: "written", ID: c.ID, Error: "write: the lock was never acquired"})
		return
	}
	tok := h.lease.Token()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		defer cancel()
		trace := &httptrace.ClientTrace{WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				h.writes <- event{Event: "sent", ID: c.ID}
			}
		}}
		h.writes <- post(httptrace.WithClientTrace(ctx, trace), c, tok)
	}()
}

// post sends one write and describes its answer.
func post(ctx context.Context, c holderproto.Command, tok distlock.Token) event {
	e := event{Event: "written", ID: c.ID, Token: tok.String()}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, strings.NewReader(c.Entry))
	if err != nil {
		e.Error = err.Error()
		return e
	}
	fencing.SetToken(req.Header, tok)
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.Error = err.Error()
		return e
	}
	defer resp.Body.Close()
	e.Status = resp.StatusCode
	err = fencing.ResponseError(c.URL, resp)
	var (
		stale *fencing.StaleError
		fork  *fencing.ForkError
	)
	if errors.As(err, &stale) {
		e.Stale, e.Newest = true, stale.Newest.String()
	}
	if errors.As(err, &fork) {
		e.Fork, e.Newest = true, fork.Admitted.String()
	}
	if err != nil {
		e.Error = err.Error()
	}
	return e
}

// shutdown stops a Lock still waiting and unlocks, best effort, before the
// session is closed.
func (h *holder) shutdown(cancelLock context.CancelFunc, locked <-chan result) {
	cancelLock()
	if locked != nil {
		if r := <-locked; r.err == nil {
			h.lease, h.release = r.lease, r.release
		}
	}
	if h.lease == nil || h.released {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	if err := h.release(ctx); err != nil {
		log.Warn("lockholder: unlock at exit", "err", err)
	}
}

// waitSession is what the -waiter holder needs of its session, which both
// etcdlock.Session and zklock.Session have: backend.Session does not show
// Deadline.
type waitSession interface {
	Done() <-chan struct{}
	Err() error
	Deadline() time.Time
	Close(ctx context.Context) error
}

// openWaiter is open for -waiter: the session is made with etcdlock or
// zklock on the backend's connection, as backend.Client.NewSession makes
// it, and kept for the report of the wait.
func openWaiter(ctx context.Context, kind backend.Kind, endpoints []string, w what, ttl time.Duration, prefix, holderID string) (func(context.Context) result, func(), *waitReport, error) {
	tc, err := backend.LoadTLS(*cacertFlag, *certFlag, *keyFlag)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("TLS: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	cli, err := backend.Dial(sctx, backend.Config{Kind: kind, Endpoints: endpoints, TLS: tc, Prefix: prefix, TTL: ttl, DialTimeout: stepTimeout, Logger: log})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("connect: %w", err)
	}
	var (
		sess     waitSession
		owner    string // the session's ID, as QueueEntry.Owner writes it
		mutex    func(name string) (distlock.Locker, error)
		election func(name string) (distlock.Elector, error)
	)
	switch kind {
	case backend.Etcd:
		s, err := etcdlock.NewSession(sctx, cli.Etcd(), etcdlock.WithTTL(cmp.Or(ttl, etcdlock.MinTTL)),
			recipe.WithPrefix(cli.Prefix()), recipe.WithHolder(holderID), recipe.WithLogger(log))
		if err != nil {
			cli.Close()
			return nil, nil, nil, err
		}
		sess, owner = s, strconv.FormatInt(int64(s.ID()), 16)
		mutex = func(name string) (distlock.Locker, error) { return recipe.NewMutex(s, name, lockOpts()...) }
		election = func(name string) (distlock.Elector, error) { return recipe.NewElection(s, name) }
	default:
		opts := []recipe.Option{recipe.WithPrefix(cli.Prefix()), recipe.WithHolder(holderID), zklock.WithACL(cli.ACL()), recipe.WithLogger(log)}
		// NewSession itself follows a connection that changes sessions
		// while it starts.
		s, err := zklock.NewSession(sctx, cli.ZK(), opts...)
		if err != nil {
			cli.Close()
			return nil, nil, nil, err
		}
		sess, owner = s, strconv.FormatInt(s.ID(), 16)
		mutex = func(name string) (distlock.Locker, error) { return recipe.NewMutex(s, name, lockOpts()...) }
		election = func(name string) (distlock.Elector, error) { return recipe.NewElection(s, name) }
	}
	cleanup := func() {
		cctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
		defer cancel()
		if err := sess.Close(cctx); err != nil {
			log.Warn("lockholder: close session", "err", err)
		}
		cli.Close()
	}
	report := &waitReport{sess: sess, queue: cli, name: w.name, owner: owner}
	if c := w.campaign; c != nil {
		el, err := election(w.name)
		if err != nil {
			cleanup()
			return nil, nil, nil, err
		}
		return func(ctx context.Context) result {
			ld, err := el.Campaign(ctx, c.value, distlock.WithPriority(c.priority))
			if err != nil {
				return result{err: err}
			}
			return result{lease: ld, release: ld.Resign}
		}, cleanup, report, nil
	}
	mu, err := mutex(w.name)
	if err != nil {
		cleanup()
		return nil, nil, nil, err
	}
	return func(ctx context.Context) result {
		l, err := mu.Lock(ctx)
		if err != nil {
			return result{err: err}
		}
		return result{lease: l, release: l.Unlock}
	}, cleanup, report, nil
}

// deadlinePoll is how often a -waiter holder reads its session's
// deadline: a keepalive that moves it is reported within about this long.
const deadlinePoll = 2 * time.Millisecond

// waitReport writes -waiter's events (see Waiting events).
type waitReport struct {
	sess  waitSession
	queue interface {
		WatchQueue(context.Context, string, func([]distlock.QueueEntry) error) error
	}
	name  string // the lock's
	owner string // the session's ID, as QueueEntry.Owner writes it

	mu   sync.Mutex
	last time.Time // the deadline last written
}

// deadline writes the session's deadline if it moved since last written.
func (w *waitReport) deadline() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if d := w.sess.Deadline(); !d.Equal(w.last) {
		w.last = d
		emit(event{Event: "deadline", Text: d.Format(time.RFC3339Nano)})
	}
}

// start writes the session's ID and its deadline, then follows the deadline, the queue (until the
// holder's entry is in it) and the session (until it ends) in the
// background, until stop.
func (w *waitReport) start(ctx context.Context) (stop func()) {
	emit(event{Event: "session", Text: w.owner})
	w.deadline()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(deadlinePoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				w.deadline()
			}
		}
	})
	wg.Go(func() {
		select {
		case <-ctx.Done():
		case <-w.sess.Done():
			w.deadline()
			emit(event{Event: "ended", Error: fmt.Sprint(w.sess.Err())})
		}
	})
	wg.Go(func() {
		wctx, found := context.WithCancel(ctx)
		defer found()
		err := w.queue.WatchQueue(wctx, w.name, func(q []distlock.QueueEntry) error {
			for _, e := range q {
				if e.Owner == w.owner && wctx.Err() == nil {
					emit(event{Event: "enqueued", Text: e.Key})
					found()
				}
			}
			return wctx.Err()
		})
		if err != nil && wctx.Err() == nil {
			log.Warn("lockholder: watch queue", "err", err)
			emit(event{Event: "error", Error: "watch queue: " + err.Error()})
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// returned reports that Lock (or Campaign) returned err: the deadline as
// it is now, then, if err is not nil, "failed". The main loop writes
// "acquired".
func (w *waitReport) returned(err error) {
	w.deadline()
	if err == nil {
		return
	}
	var is []string
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			is = append(is, s.name)
		}
	}
	emit(event{Event: "failed", Error: err.Error(), Cause: strings.Join(is, ",")})
}

// sentinels are the errors a "failed" event's cause may name.
var sentinels = []struct {
	name string
	err  error
}{
	{"ErrSessionExpired", distlock.ErrSessionExpired},
	{"ErrSessionClosed", distlock.ErrSessionClosed},
	{"ErrLost", distlock.ErrLost},
	{"ErrEntryGone", distlock.ErrEntryGone},
	{"ErrReleased", distlock.ErrReleased},
	{"ErrLocked", distlock.ErrLocked},
	{"ErrNotLeader", distlock.ErrNotLeader},
	{"ErrRevoked", distlock.ErrRevoked},
	{"ErrHistoryRewound", distlock.ErrHistoryRewound},
	{"context.Canceled", context.Canceled},
	{"context.DeadlineExceeded", context.DeadlineExceeded},
}
