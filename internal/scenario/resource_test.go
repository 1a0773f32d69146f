package scenario_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
)

// entry is one line of the resource's ledger.
type entry struct {
	Token distlock.Token
	Text  string
}

// ledger is the protected resource: an append-only list of entries, each
// with the token its writer carried.
type ledger struct {
	mu      sync.Mutex
	entries []entry
}

func (l *ledger) append(t distlock.Token, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, entry{t, text})
}

func (l *ledger) snapshot() []entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]entry(nil), l.entries...)
}

// writer is the resource's fenced write path: it appends text to the
// ledger only if tok is admitted, atomically with the fencing check, and
// otherwise returns the fence's error (a *fencing.StaleError for a stale
// token).
type writer func(ctx context.Context, tok distlock.Token, text string) error

// fenceBackend makes the fenced write path of a fresh resource guarded by
// lock: one entry per fencing backend.
type fenceBackend struct {
	name string
	new  func(t *testing.T, env *env, lock string, l *ledger) writer
}

// doerWriter fences the ledger with a fencing.Doer: the append runs inside
// Do, atomically with the check.
func doerWriter(f fencing.Doer, l *ledger) writer {
	return func(ctx context.Context, tok distlock.Token, text string) error {
		return f.Do(ctx, tok, func(context.Context) error {
			l.append(tok, text)
			return nil
		})
	}
}

// resource is the HTTP face of a ledger: POST /ledger with a
// Fencing-Token header and the entry as the body.
type resource struct {
	ledger ledger
	srv    *httptest.Server
}

// newResource starts a resource server whose writes go through the
// fencing backend fb.
func newResource(t *testing.T, env *env, fb fenceBackend, lock string) *resource {
	t.Helper()
	r := &resource{}
	w := fb.new(t, env, lock, &r.ledger)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /ledger", func(rw http.ResponseWriter, req *http.Request) {
		tok, err := fencing.RequestToken(req)
		if err != nil {
			refuse(rw, http.StatusBadRequest, fencing.Refusal{Error: err.Error()})
			return
		}
		body, err := io.ReadAll(io.LimitReader(req.Body, 64<<10))
		if err != nil {
			refuse(rw, http.StatusBadRequest, fencing.Refusal{Error: err.Error(), Token: tok.String()})
			return
		}
		err = w(req.Context(), tok, string(body))
		var stale *fencing.StaleError
		switch {
		case err == nil:
			rw.WriteHeader(http.StatusNoContent)
		case errors.As(err, &stale):
			refuse(rw, http.StatusConflict, fencing.Refusal{Error: err.Error(), Token: tok.String(), Newest: stale.Newest.String()})
		case errors.Is(err, fencing.ErrForeignToken):
			refuse(rw, http.StatusConflict, fencing.Refusal{Error: err.Error(), Token: tok.String()})
		case errors.Is(err, distlock.ErrInvalidToken):
			refuse(rw, http.StatusBadRequest, fencing.Refusal{Error: err.Error(), Token: tok.String()})
		default:
			refuse(rw, http.StatusServiceUnavailable, fencing.Refusal{Error: err.Error(), Token: tok.String()})
		}
	})
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	return r
}

func refuse(rw http.ResponseWriter, code int, body fencing.Refusal) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(code)
	json.NewEncoder(rw).Encode(body)
}

// URL returns the write endpoint.
func (r *resource) URL() string { return r.srv.URL + "/ledger" }

// Addr returns the server's host:port.
func (r *resource) Addr() string { return r.srv.Listener.Addr().String() }

// write sends one write from the test process, as a holder would.
func write(ctx context.Context, url string, tok distlock.Token, text string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(text))
	if err != nil {
		return err
	}
	fencing.SetToken(req.Header, tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return fencing.ResponseError(url, resp)
}
