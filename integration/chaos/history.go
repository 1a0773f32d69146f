package chaos

import (
	"bufio"
	"encoding/json"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Outcome is what a client knows about an operation once its call
// returned.
type Outcome string

const (
	// OK: the operation took effect.
	OK Outcome = "ok"
	// Fail: the operation certainly did not take effect (a fence refused
	// it, Lock gave up with nothing held).
	Fail Outcome = "fail"
	// Info: the outcome is unknown (a timeout, a lost reply): the
	// operation may take effect at any later time.
	Info Outcome = "info"
)

// Kinds of operations in a history.
const (
	KindAcquire = "acquire" // Lock returned (ok: Token is the acquisition's)
	KindRelease = "release" // Unlock
	KindLost    = "lost"    // the held lock's Done fired without Unlock
	KindRead    = "read"    // a read of a register inside a critical section
	KindWrite   = "write"   // a write of a register inside a critical section
	KindFault   = "fault"   // a nemesis fault: invoke = injected, complete = healed
	KindObserve = "observe" // an election observer saw a leader (Token; "" for none)
	KindOrphans = "orphans" // the entries left once every session closed
	// KindHandOff is a leader's Leadership.HandOff: Token is its own
	// term's, To the value asked for ("" for the next in line), and, when
	// ok, Next and Leader the successor's term and value. Kept marks one
	// that found no candidate (distlock.ErrNoCandidate): the leader kept
	// leading. Any other handoff ends the leader's hold, like a release.
	KindHandOff = "handoff"
	// KindRevoked is a leader's (or holder's) Done closing with a
	// *distlock.RevokedError: asked to step down (a preemption by a
	// candidate of a higher priority, or an operator's Revoke); it still
	// leads until it hands off, resigns or is forced out.
	KindRevoked = "revoked"
	// KindTerm is one election term as its Leadership's Done saw it:
	// Invoke when its Campaign returned, Complete when its Done was seen
	// closed (0 while open), Error Done's cause, Mode how it ended (see
	// termEnd). Recorded by the election workload's termLog.
	KindTerm = "term"
)

// faultEntryGone is a lost event's Fault when the loss says the entry was
// deleted by someone else (distlock.ErrEntryGone): forced out.
const faultEntryGone = "entry-gone"

// Op is one operation of a history.
type Op struct {
	// Index numbers the operations in the order they were invoked.
	Index int `json:"index"`
	// Process is who did it: "w3" (in-process worker 3), "holder-1234"
	// (a lock holder in a child process), "nemesis", "checker".
	Process string `json:"process"`
	// Kind is one of the Kind constants.
	Kind string `json:"kind"`
	// Mode is how an acquisition holds: "write" (Mutex, RWMutex.Lock),
	// "read" (RWMutex.RLock), "leader" (Election.Campaign); how a leader
	// ends its term: "resign" (a release), "next" or "named" (a handoff
	// to the next in line, or to the candidate of value To).
	Mode string `json:"mode,omitempty"`
	// Locks are the names a multi-lock acquisition holds (Token is then
	// the first one's token; the others carry the same sequence and
	// owner). Empty for an acquisition of one lock, Token's.
	Locks []string `json:"locks,omitempty"`
	// Register names the register of a read or write.
	Register string `json:"register,omitempty"`
	// Invoke and Complete are nanoseconds since the run started;
	// Complete is 0 while the operation is pending.
	Invoke   int64 `json:"invoke"`
	Complete int64 `json:"complete"`
	// Outcome says whether it took effect.
	Outcome Outcome `json:"outcome"`
	// Token is the text form of the fencing token the operation carried
	// (acquire: the token obtained).
	Token string `json:"token,omitempty"`
	// Value is the value read or written.
	Value int64 `json:"value"`
	// CS numbers the critical section (one acquisition's use of one
	// register) a read or write belongs to.
	CS int64 `json:"cs,omitempty"`
	// Order is, for an admitted write, its position in the register's
	// own admission order (the fence's serial order, or the store's
	// revision/zxid of the write).
	Order int64 `json:"order,omitempty"`
	// Fault names a fault, or the nemesis behind a lost lock.
	Fault string `json:"fault,omitempty"`
	// Target is the process or server a fault hit.
	Target string `json:"target,omitempty"`
	// Error is the error text, if any.
	Error string `json:"error,omitempty"`
	// Priority is a campaign's priority (distlock.WithPriority).
	Priority int `json:"priority,omitempty"`
	// Grace is a campaign's election's preempt grace
	// (distlock.WithPreemptGrace), in nanoseconds.
	Grace int64 `json:"grace,omitempty"`
	// To is the value a handoff asked for ("" for the next in line).
	To string `json:"to,omitempty"`
	// Next is the token of the term a handoff started (the LeaderInfo it
	// returned).
	Next string `json:"next,omitempty"`
	// Leader is a leader's value: the successor a handoff returned, or
	// the leader an observer saw.
	Leader string `json:"leader,omitempty"`
	// Kept marks a handoff that found no candidate: the leader kept
	// leading.
	Kept bool `json:"kept,omitempty"`
}

// History records operations from many goroutines.
type History struct {
	start time.Time
	hook  atomic.Pointer[func(Op)] // see SetHook

	mu  sync.Mutex
	ops []*Op
}

// SetHook makes Invoke call f with each operation before recording it,
// in the invoking goroutine, so that the operation itself waits for f: a
// nemesis uses it to act just before a worker's release goes out (see
// etcd-revoke-lease). nil removes it.
func (h *History) SetHook(f func(Op)) {
	if f == nil {
		h.hook.Store(nil)
		return
	}
	h.hook.Store(&f)
}

// NewHistory starts an empty history; its clock starts now.
func NewHistory() *History { return &History{start: time.Now()} }

// Now returns nanoseconds since the history started (monotonic).
func (h *History) Now() int64 { return int64(time.Since(h.start)) }

// Invoke records the invocation of op (its Invoke is set now) and returns
// it for Complete.
func (h *History) Invoke(op Op) *Op {
	if f := h.hook.Load(); f != nil {
		(*f)(op)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	op.Invoke = h.Now()
	op.Index = len(h.ops)
	p := &op
	h.ops = append(h.ops, p)
	return p
}

// Record records op with the Invoke and Complete its caller set (times
// from Now; Complete 0 while pending), without the hook: an interval
// measured by the caller, e.g. an election term's Done (termLog). Update
// and Complete change it later.
func (h *History) Record(op Op) *Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	op.Index = len(h.ops)
	p := &op
	h.ops = append(h.ops, p)
	return p
}

// Complete records op's outcome now.
func (h *History) Complete(op *Op, outcome Outcome, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	op.Complete = h.Now()
	op.Outcome = outcome
	if err != nil {
		op.Error = err.Error()
	}
}

// Update changes a recorded op under the history's lock.
func (h *History) Update(op *Op, f func(*Op)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(op)
}

// Event records an instantaneous operation (invoke = complete = now).
func (h *History) Event(op Op) *Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	op.Invoke = h.Now()
	op.Complete = op.Invoke
	op.Index = len(h.ops)
	p := &op
	h.ops = append(h.ops, p)
	return p
}

// Ops returns a copy of the operations, in invocation order. Operations
// still pending are returned with Outcome Info and Complete 0.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Op, len(h.ops))
	for i, p := range h.ops {
		out[i] = *p
		if out[i].Outcome == "" {
			out[i].Outcome = Info
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Invoke < out[j].Invoke })
	return out
}

// WriteJSONL writes the history to path, one JSON object per line.
func WriteJSONL(path string, ops []Op) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, op := range ops {
		if err := enc.Encode(op); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
