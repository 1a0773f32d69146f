package fencing_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
)

// A service that owns a resource guards it with a fence; clients send the
// token of the lock they hold with every write.
func ExampleMiddleware() {
	fence, _ := fencing.NewMemory("reports/daily")
	srv := httptest.NewServer(fencing.Middleware(fence, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, _ := fencing.FromContext(r.Context())
		fmt.Println("written with", t)
	})))
	defer srv.Close()

	send := func(t distlock.Token) error {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, nil)
		fencing.SetToken(req.Header, t)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return fencing.ResponseError("report store", resp)
	}
	send(distlock.Token{Name: "reports/daily", Seq: 1042, Owner: 0x694d7f0c8a1b2c3d})        // the new holder
	err := send(distlock.Token{Name: "reports/daily", Seq: 1017, Owner: 0x694d7f0c8a1b2b07}) // a paused old holder, awake again
	fmt.Println(errors.Is(err, fencing.ErrStale), err)
	// Output:
	// written with reports/daily@1042.694d7f0c8a1b2c3d
	// true fencing: report store: token reports/daily@1017.694d7f0c8a1b2b07 refused: reports/daily@1042.694d7f0c8a1b2c3d was admitted already
}

// A cluster restored from a backup without moving its revisions on issues
// a sequence number again, to another session. The fence refuses the
// second acquisition with that number instead of taking it for a retry.
func ExampleForkError() {
	fence, _ := fencing.NewMemory("reports/daily")
	ctx := context.Background()
	fmt.Println(fence.Admit(ctx, distlock.Token{Name: "reports/daily", Seq: 1042, Owner: 0x694d7f0c8a1b2c3d}))
	fmt.Println(fence.Admit(ctx, distlock.Token{Name: "reports/daily", Seq: 1042, Owner: 0x694d7f0c8a1b2c3d})) // a retry
	err := fence.Admit(ctx, distlock.Token{Name: "reports/daily", Seq: 1042, Owner: 0x694d80a3e1f00011})       // after the restore
	fmt.Println(errors.Is(err, fencing.ErrFork), fencing.Reason(err))
	// Output:
	// <nil>
	// <nil>
	// true fork
}
