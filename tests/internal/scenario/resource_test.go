package scenario_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
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
// with the token its writer carried, kept where its fencing backend keeps
// the newest token.
type ledger interface {
	// append adds an entry only if tok is admitted, atomically with the
	// fencing check, and otherwise returns the fence's error (a
	// *fencing.StaleError for a stale token).
	append(ctx context.Context, tok distlock.Token, text string) error
	// entries returns the ledger in the order the appends committed.
	entries(ctx context.Context) ([]entry, error)
}

// fenceBackend makes a fresh ledger guarded by lock: one entry per
// fencing backend.
type fenceBackend struct {
	name string
	new  func(ctx context.Context, t *testing.T, env *env, lock string) ledger
}

// memoryLedger is a slice fenced by a fencing.Memory: the append runs
// inside Do, atomically with the check.
type memoryLedger struct {
	fence *fencing.Memory
	mu    sync.Mutex
	list  []entry
}

func (l *memoryLedger) append(ctx context.Context, tok distlock.Token, text string) error {
	return l.fence.Do(ctx, tok, func(context.Context) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.list = append(l.list, entry{tok, text})
		return nil
	})
}

func (l *memoryLedger) entries(context.Context) ([]entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.list), nil
}

// record is an entry as stored in etcd and ZooKeeper.
type record struct {
	Token string `json:"token"`
	Text  string `json:"text"`
}

func encodeEntry(tok distlock.Token, text string) []byte {
	b, _ := json.Marshal(record{tok.String(), text})
	return b
}

func decodeEntry(b []byte) (entry, error) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return entry{}, err
	}
	tok, err := distlock.ParseToken(r.Token)
	return entry{tok, r.Text}, err
}

// resource is the HTTP face of a ledger: POST /ledger with a
// Fencing-Token header and the entry as the body.
type resource struct {
	ledger ledger
	srv    *httptest.Server
}

// entries returns the ledger, failing the test if it cannot be read.
func (r *resource) entries(ctx context.Context, t *testing.T) []entry {
	t.Helper()
	es, err := r.ledger.entries(ctx)
	if err != nil {
		t.Fatalf("reading the ledger: %v", err)
	}
	return es
}

// newResource starts a resource server whose writes go through the
// fencing backend fb.
func newResource(ctx context.Context, t *testing.T, env *env, fb fenceBackend, lock string) *resource {
	t.Helper()
	r := &resource{ledger: fb.new(ctx, t, env, lock)}
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
		err = r.ledger.append(req.Context(), tok, string(body))
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
