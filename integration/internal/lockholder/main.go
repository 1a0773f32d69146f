// Command lockholder holds one distlock lock in a process of its own, so
// that tests can stop it (SIGSTOP, like a long GC pause), continue it and
// kill it for real. integration.StartHolder runs it.
//
//	lockholder -backend etcd -endpoints http://127.0.0.1:2379 -lock reports/daily [-ttl 2s] [-prefix /distlock/]
//
// It acquires the lock with Mutex.Lock, then speaks a line protocol. On
// stdout it writes one JSON object per line, one per event:
//
//	{"event":"acquired","token":"reports/daily@42","pid":1234}
//	{"event":"lost","error":"..."}              the library said the lock is lost
//	{"event":"pong","held":true,"token":"...","lost":false}
//	{"event":"released"}                         after unlock ("error" set if Unlock failed)
//	{"event":"error","error":"..."}              a failure
//
// On stdin it reads one command per line: "ping" (answered by pong),
// "unlock" (answered by released, or by error when nothing is held) and
// "exit". Every ping and unlock gets exactly one answer, in order. "lost" is
// written once, as soon as the process learns of the loss, and always
// before any answer that reflects it. On "exit", stdin EOF, SIGTERM or
// SIGINT it unlocks (best effort), closes its session and exits 0. Setup
// errors, including a failed Lock, are reported as an error event and exit
// 1. Diagnostics (etcdlock's log) go to stderr.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// event is one line of output. Pointers keep false booleans in pongs while
// leaving them out of other events.
type event struct {
	Event string `json:"event"`
	Token string `json:"token,omitempty"`
	PID   int    `json:"pid,omitempty"`
	Held  *bool  `json:"held,omitempty"`
	Lost  *bool  `json:"lost,omitempty"`
	Error string `json:"error,omitempty"`
}

// stepTimeout bounds each request made on behalf of a command or of the
// shutdown.
const stepTimeout = 10 * time.Second

var (
	out = json.NewEncoder(os.Stdout) // used by the main goroutine only
	log = slog.New(slog.NewTextHandler(os.Stderr, nil))
)

func emit(e event) {
	if err := out.Encode(e); err != nil {
		log.Error("lockholder: write event", "event", e.Event, "err", err)
	}
}

func main() { os.Exit(run()) }

func run() int {
	backend := flag.String("backend", "etcd", "lock service: etcd (zk is not supported yet)")
	endpoints := flag.String("endpoints", "", "comma-separated endpoints of the lock service")
	name := flag.String("lock", "", "name of the lock to hold")
	ttl := flag.Duration("ttl", etcdlock.MinTTL, "session TTL")
	prefix := flag.String("prefix", "", "key prefix of the locks (default: the backend's)")
	flag.Parse()

	fail := func(err error) int {
		log.Error("lockholder: " + err.Error())
		emit(event{Event: "error", Error: err.Error()})
		return 1
	}
	switch {
	case *backend == "zk":
		return fail(errors.New("backend zk is not supported yet (only etcd)"))
	case *backend != "etcd":
		return fail(fmt.Errorf("unknown backend %q (want etcd)", *backend))
	case *endpoints == "":
		return fail(errors.New("-endpoints is required"))
	case *name == "":
		return fail(errors.New("-lock is required"))
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(*endpoints, ","),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return fail(fmt.Errorf("connect: %w", err))
	}
	defer cli.Close()
	opts := []etcdlock.Option{etcdlock.WithTTL(*ttl), etcdlock.WithLogger(log), etcdlock.WithHolder(fmt.Sprintf("lockholder:%d", os.Getpid()))}
	if *prefix != "" {
		opts = append(opts, etcdlock.WithPrefix(*prefix))
	}
	sctx, cancel := context.WithTimeout(ctx, stepTimeout)
	sess, err := etcdlock.NewSession(sctx, cli, opts...)
	cancel()
	if err != nil {
		return fail(err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
		defer cancel()
		if err := sess.Close(cctx); err != nil {
			log.Warn("lockholder: close session", "err", err)
		}
	}()
	mu, err := etcdlock.NewMutex(sess, *name)
	if err != nil {
		return fail(err)
	}

	// Commands are read while Lock waits too, so that stdin EOF ends a
	// holder that never acquires.
	cmds := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
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
	go func() {
		l, err := mu.Lock(lockCtx)
		locked <- result{l, err}
	}()

	h := &holder{}
	defer func() { h.shutdown(cancelLock, locked) }() // locked as it is then
	for {
		select {
		case r := <-locked:
			locked = nil
			if r.err != nil {
				return fail(r.err)
			}
			h.lease = r.lease
			h.done = r.lease.Done()
			emit(event{Event: "acquired", Token: r.lease.Token().String(), PID: os.Getpid()})
		case <-h.done:
			h.noteLost(nil)
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

// result is what Lock returned.
type result struct {
	lease *distlock.Lease
	err   error
}

// holder is the state of the held lock, used by the main goroutine only.
type holder struct {
	lease    *distlock.Lease // nil until acquired
	done     <-chan struct{} // lease.Done() until the loss is reported or the lease released
	lost     bool            // "lost" was written
	released bool
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

func (h *holder) command(cmd string) {
	h.noteLost(nil) // so that no answer contradicts an unreported loss
	switch cmd {
	case "ping":
		held := h.lease != nil && !h.released && !h.lost
		e := event{Event: "pong", Held: &held, Lost: &h.lost}
		if h.lease != nil {
			e.Token = h.lease.Token().String()
		}
		emit(e)
	case "unlock":
		if h.lease == nil || h.released {
			emit(event{Event: "error", Error: "unlock: the lock is not held (not acquired yet, or already unlocked)"})
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
		err := h.lease.Unlock(ctx)
		cancel()
		h.released, h.done = true, nil
		h.noteLost(err) // Unlock may be the first to find the entry gone
		e := event{Event: "released"}
		if err != nil {
			e.Error = err.Error()
			e.Lost = &h.lost
		}
		emit(e)
	default:
		emit(event{Event: "error", Error: fmt.Sprintf("unknown command %q (want ping, unlock or exit)", cmd)})
	}
}

// shutdown stops a Lock still waiting and unlocks, best effort, before the
// session is closed.
func (h *holder) shutdown(cancelLock context.CancelFunc, locked <-chan result) {
	cancelLock()
	if locked != nil {
		if r := <-locked; r.err == nil {
			h.lease = r.lease
		}
	}
	if h.lease == nil || h.released {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	if err := h.lease.Unlock(ctx); err != nil {
		log.Warn("lockholder: unlock at exit", "err", err)
	}
}
