package fencing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/distlock/distlock"
)

// Header is the HTTP header that carries a fencing token, in the text form
// of distlock.Token.String ("name@seq.owner"). A header in the form of
// earlier versions ("name@seq", no owner) does not parse and is refused
// with 400 Bad Request.
const Header = "Fencing-Token"

// ErrNoToken reports a request without a Fencing-Token header.
var ErrNoToken = errors.New("no " + Header + " header")

// SetToken sets the Fencing-Token header of an outgoing request.
func SetToken(h http.Header, t distlock.Token) { h.Set(Header, t.String()) }

// RequestToken returns the token a request carries; the error wraps
// ErrNoToken when it carries none and distlock.ErrInvalidToken when the
// header does not parse.
func RequestToken(r *http.Request) (distlock.Token, error) {
	v := r.Header.Values(Header)
	switch len(v) {
	case 0:
		return distlock.Token{}, ErrNoToken
	case 1:
		return distlock.ParseToken(v[0])
	}
	return distlock.Token{}, fmt.Errorf("%w: %d %s headers", distlock.ErrInvalidToken, len(v), Header)
}

type tokenKey struct{}

// FromContext returns the token Middleware admitted for the request whose
// context ctx is.
func FromContext(ctx context.Context) (distlock.Token, bool) {
	t, ok := ctx.Value(tokenKey{}).(distlock.Token)
	return t, ok
}

// Refusal is the JSON body of a refused request.
type Refusal struct {
	// Error says what happened, in one line.
	Error string `json:"error"`
	// Token is the refused token's text, when it parsed.
	Token string `json:"token,omitempty"`
	// Newest is the token the resource admitted before: a newer one for a
	// stale token, the one with the same sequence number for a fork.
	Newest string `json:"newest,omitempty"`
	// Reason classifies the refusal as Reason does: "stale", "fork",
	// "foreign" or "malformed"; empty when the fence could not decide
	// (503).
	Reason string `json:"reason,omitempty"`
}

// Middleware admits the request's token through f before calling next:
// 400 Bad Request for a missing or malformed token, 409 Conflict for a
// stale one, a fork (another acquisition with the same sequence number was
// admitted) or one of another lock (with a JSON Refusal body), 503 when
// the fence's store cannot be reached. The admitted token is in the
// request's context (FromContext).
//
// If f is a Doer (Memory), next runs inside f.Do, atomically with the
// check. Otherwise Admit and the handler's write are two steps: the
// handler must repeat the check in its own write (e.g. sqlfence in the
// same transaction, etcdfence in the same Txn) for the write to be fenced;
// Middleware then only turns stale callers away early.
//
// The fence counts and traces its own decisions; opts say where Middleware
// reports the requests it turns away before asking the fence (a missing
// or malformed token: distlock.fence.refused with kind "http").
func Middleware(f Fence, next http.Handler, opts ...Option) http.Handler {
	tel := NewTelemetry("http", "", opts...)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, err := RequestToken(r)
		if err != nil {
			tel.Record(r.Context(), t, err)
			refuse(w, http.StatusBadRequest, Refusal{Error: err.Error(), Reason: Reason(err)})
			return
		}
		ctx := context.WithValue(r.Context(), tokenKey{}, t)
		serve := func(context.Context) error { next.ServeHTTP(w, r.WithContext(ctx)); return nil }
		if d, ok := f.(Doer); ok {
			err = d.Do(ctx, t, serve)
		} else if err = f.Admit(ctx, t); err == nil {
			err = serve(ctx)
		}
		var (
			stale *StaleError
			fork  *ForkError
		)
		switch {
		case err == nil:
		case errors.As(err, &stale):
			refuse(w, http.StatusConflict, Refusal{Error: err.Error(), Token: t.String(), Newest: stale.Newest.String(), Reason: Reason(err)})
		case errors.As(err, &fork):
			refuse(w, http.StatusConflict, Refusal{Error: err.Error(), Token: t.String(), Newest: fork.Admitted.String(), Reason: Reason(err)})
		case errors.Is(err, ErrForeignToken):
			refuse(w, http.StatusConflict, Refusal{Error: err.Error(), Token: t.String(), Reason: Reason(err)})
		case errors.Is(err, distlock.ErrInvalidToken):
			refuse(w, http.StatusBadRequest, Refusal{Error: err.Error(), Token: t.String(), Reason: Reason(err)})
		default:
			refuse(w, http.StatusServiceUnavailable, Refusal{Error: err.Error(), Token: t.String()})
		}
	})
}

func refuse(w http.ResponseWriter, code int, body Refusal) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(body)
}

// ResponseError turns a response from a fenced endpoint into an error: nil
// for 2xx, a *StaleError for a 409 that refused a stale token and a
// *ForkError for one that refused a fork (so that errors.Is(err, ErrStale)
// and errors.Is(err, ErrFork) hold on the client too), and otherwise an
// error with the status and the body's message. It reads (a bounded part
// of) the body of a non-2xx response.
func ResponseError(resource string, resp *http.Response) error {
	if resp.StatusCode/100 == 2 {
		return nil
	}
	var ref Refusal
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &ref) != nil || ref.Error == "" {
		ref.Error = string(b)
	}
	if resp.StatusCode == http.StatusConflict && ref.Newest != "" {
		t, err1 := distlock.ParseToken(ref.Token)
		n, err2 := distlock.ParseToken(ref.Newest)
		switch {
		case err1 != nil:
		case ref.Reason == "fork" || ref.Reason == "" && err2 == nil && n.Seq == t.Seq:
			if err2 != nil {
				// A sequence number stored before tokens named their
				// owner ("name@seq.0").
				n = distlock.Token{Name: t.Name, Seq: t.Seq}
			}
			return &ForkError{Resource: resource, Token: t, Admitted: n}
		case err2 == nil:
			return &StaleError{Resource: resource, Token: t, Newest: n}
		}
	}
	return fmt.Errorf("fencing: %s: %s: %s", resource, resp.Status, ref.Error)
}
