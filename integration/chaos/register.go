package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
)

// Register is an integer register written inside a lock's critical
// sections, fenced or not.
type Register interface {
	// Name names the register in histories ("memory", "store",
	// "unfenced").
	Name() string
	// Fenced says whether the register checks tokens.
	Fenced() bool
	// Read returns the value, admitting t first when fenced.
	Read(ctx context.Context, t distlock.Token) (int64, error)
	// Write sets the value if t is admitted; it returns the write's
	// position in the register's own order of writes.
	Write(ctx context.Context, t distlock.Token, v int64) (order int64, err error)
}

// Admission is one admitted write as the register itself ordered it.
type Admission struct {
	Order int64  `json:"order"`
	Token string `json:"token"`
	tok   distlock.Token
}

// admissions is the log of a register's admitted writes.
type admissions struct {
	mu  sync.Mutex
	log []Admission
}

func (a *admissions) add(order int64, t distlock.Token) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.log = append(a.log, Admission{Order: order, Token: t.String(), tok: t})
}

func (a *admissions) sorted() []Admission {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := append([]Admission(nil), a.log...)
	sort.Slice(out, func(i, j int) bool { return out[i].Order < out[j].Order })
	return out
}

// memRegister is fenced by fencing.Memory: the read and the write each
// run inside the fence's Do, atomically with the token check.
type memRegister struct {
	fence *fencing.Memory
	value int64 // guarded by the fence's Do
	seq   int64 // guarded by the fence's Do
}

func newMemRegister(lock string) (*memRegister, error) {
	f, err := fencing.NewMemory(lock)
	if err != nil {
		return nil, err
	}
	return &memRegister{fence: f}, nil
}

func (r *memRegister) Name() string { return "memory" }
func (r *memRegister) Fenced() bool { return true }

func (r *memRegister) Read(ctx context.Context, t distlock.Token) (v int64, err error) {
	err = r.fence.Do(ctx, t, func(context.Context) error { v = r.value; return nil })
	return v, err
}

func (r *memRegister) Write(ctx context.Context, t distlock.Token, v int64) (order int64, err error) {
	err = r.fence.Do(ctx, t, func(context.Context) error {
		r.value = v
		r.seq++
		order = r.seq
		return nil
	})
	return order, err
}

// unfencedRegister is the control: the same register without any token
// check, as a resource that trusts the lock alone.
type unfencedRegister struct {
	mu    sync.Mutex
	value int64
	seq   int64
}

func (r *unfencedRegister) Name() string { return "unfenced" }
func (r *unfencedRegister) Fenced() bool { return false }

func (r *unfencedRegister) Read(context.Context, distlock.Token) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.value, nil
}

func (r *unfencedRegister) Write(_ context.Context, _ distlock.Token, v int64) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.value = v
	r.seq++
	return r.seq, nil
}

// loggedRegister keeps the admission log of a register.
type loggedRegister struct {
	Register
	admitted admissions
}

func (r *loggedRegister) Write(ctx context.Context, t distlock.Token, v int64) (int64, error) {
	order, err := r.Register.Write(ctx, t, v)
	if err == nil {
		r.admitted.add(order, t)
	}
	return order, err
}

// registerServer serves the registers over HTTP for lock holders in child
// processes (integration.Holder.Write): POST /<register> with the value
// as body and the token in the Fencing-Token header.
type registerServer struct {
	srv  *http.Server
	ln   net.Listener
	regs map[string]*loggedRegister
}

func newRegisterServer(regs []*loggedRegister) (*registerServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &registerServer{ln: ln, regs: map[string]*loggedRegister{}}
	for _, r := range regs {
		s.regs[r.Name()] = r
	}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve)}
	go s.srv.Serve(ln)
	return s, nil
}

func (s *registerServer) URL(name string) string {
	return "http://" + s.ln.Addr().String() + "/" + name
}

func (s *registerServer) Close() error { return s.srv.Close() }

func (s *registerServer) serve(w http.ResponseWriter, req *http.Request) {
	r, ok := s.regs[strings.TrimPrefix(req.URL.Path, "/")]
	if !ok {
		http.NotFound(w, req)
		return
	}
	t, err := fencing.RequestToken(req)
	if err != nil {
		refuse(w, http.StatusBadRequest, fencing.Refusal{Error: err.Error()})
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, 64))
	if err != nil {
		refuse(w, http.StatusBadRequest, fencing.Refusal{Error: err.Error()})
		return
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(body)), 10, 64)
	if err != nil {
		refuse(w, http.StatusBadRequest, fencing.Refusal{Error: err.Error()})
		return
	}
	if _, err := r.Write(req.Context(), t, v); err != nil {
		var stale *fencing.StaleError
		if errors.As(err, &stale) {
			refuse(w, http.StatusConflict, fencing.Refusal{Error: err.Error(), Token: t.String(), Newest: stale.Newest.String()})
			return
		}
		refuse(w, http.StatusServiceUnavailable, fencing.Refusal{Error: err.Error()})
		return
	}
	w.WriteHeader(http.StatusOK)
}

func refuse(w http.ResponseWriter, status int, r fencing.Refusal) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(r)
}

// outcomeOf classifies a register error: refused by a fence (certainly not
// applied) or unknown.
func outcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return OK
	case errors.Is(err, fencing.ErrStale), errors.Is(err, fencing.ErrForeignToken), errors.Is(err, distlock.ErrInvalidToken):
		return Fail
	}
	return Info
}
