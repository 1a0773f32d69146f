package fencing_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
)

// A Memory fence guards a resource in the process that owns it: Do runs
// the write only if the token is not older than one already admitted, and
// holds the fence while it runs, so the check and the write are one step.
func ExampleMemory() {
	ctx := context.Background()
	fence, err := fencing.NewMemory("reports/daily")
	if err != nil {
		log.Fatal(err)
	}
	write := func(t distlock.Token) error {
		return fence.Do(ctx, t, func(ctx context.Context) error {
			fmt.Println("report written with", t)
			return nil
		})
	}
	// A lease's Token(), from the lock's holder of the moment.
	if err := write(distlock.Token{Name: "reports/daily", Seq: 1042, Owner: 0x694d7f0c8a1b2c3d}); err != nil {
		log.Fatal(err)
	}
	// A paused old holder, awake again.
	err = write(distlock.Token{Name: "reports/daily", Seq: 1017, Owner: 0x694d7f0c8a1b2b07})
	var stale *fencing.StaleError
	fmt.Println(errors.As(err, &stale), "newest:", stale.Newest)
	// Output:
	// report written with reports/daily@1042.694d7f0c8a1b2c3d
	// true newest: reports/daily@1042.694d7f0c8a1b2c3d
}

// A service that owns a resource guards it with a fence; clients send the
// token of the lock they hold with every write.
func ExampleMiddleware() {
	fence, err := fencing.NewMemory("reports/daily")
	if err != nil {
		log.Fatal(err)
	}
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
	if err := send(distlock.Token{Name: "reports/daily", Seq: 1042, Owner: 0x694d7f0c8a1b2c3d}); err != nil { // the new holder
		log.Fatal(err)
	}
	err = send(distlock.Token{Name: "reports/daily", Seq: 1017, Owner: 0x694d7f0c8a1b2b07}) // a paused old holder, awake again
	fmt.Println(errors.Is(err, fencing.ErrStale), err)
	// Output:
	// written with reports/daily@1042.694d7f0c8a1b2c3d
	// true fencing: report store: token reports/daily@1017.694d7f0c8a1b2b07 refused: reports/daily@1042.694d7f0c8a1b2c3d was admitted already
}

// A cluster restored from a backup without moving its revisions on issues
// a sequence number again, to another session. The fence refuses the
// second acquisition with that number instead of taking it for a retry.
func ExampleForkError() {
	fence, err := fencing.NewMemory("reports/daily")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	fmt.Println(fence.Admit(ctx, distlock.Token{Name: "reports/daily", Seq: 1042, Owner: 0x694d7f0c8a1b2c3d}))
	fmt.Println(fence.Admit(ctx, distlock.Token{Name: "reports/daily", Seq: 1042, Owner: 0x694d7f0c8a1b2c3d})) // a retry
	err = fence.Admit(ctx, distlock.Token{Name: "reports/daily", Seq: 1042, Owner: 0x694d80a3e1f00011})        // after the restore
	fmt.Println(errors.Is(err, fencing.ErrFork), fencing.Reason(err))
	// Output:
	// <nil>
	// <nil>
	// true fork
}

// A holder of two locks at once (one acquisition of "accounts/alice" and
// "accounts/bob", one token per name) moves money between two in-process
// balances, each fenced by its own lock: the transfer runs only if both
// fences admit their token, and a stale token for either refuses all of
// it.
func ExampleDoAll() {
	alice, err := fencing.NewMemory("accounts/alice")
	if err != nil {
		log.Fatal(err)
	}
	bob, err := fencing.NewMemory("accounts/bob")
	if err != nil {
		log.Fatal(err)
	}
	balances := map[string]int{"alice": 100, "bob": 0}
	transfer := func(tokens []distlock.Token, amount int) error {
		return fencing.DoAll(context.Background(), tokens, []*fencing.Memory{alice, bob}, func(context.Context) error {
			balances["alice"] -= amount
			balances["bob"] += amount
			return nil
		})
	}
	// lease.Tokens() of the multi-lock: one token per name, sorted by name.
	holder := []distlock.Token{
		{Name: "accounts/alice", Seq: 1042, Owner: 0x694d7f0c8a1b2c3d},
		{Name: "accounts/bob", Seq: 1042, Owner: 0x694d7f0c8a1b2c3d},
	}
	fmt.Println(transfer(holder, 30))
	// Meanwhile bob's lock alone went to a newer holder, which wrote.
	fmt.Println(bob.Admit(context.Background(), distlock.Token{Name: "accounts/bob", Seq: 1050, Owner: 0x694d80a3e1f00011}))
	// The paused multi-lock holder wakes and retries: refused whole.
	err = transfer(holder, 30)
	fmt.Println(errors.Is(err, fencing.ErrStale), err)
	fmt.Println(balances)
	// Output:
	// <nil>
	// <nil>
	// true fencing: memory fence of lock accounts/bob: token accounts/bob@1042.694d7f0c8a1b2c3d refused: accounts/bob@1050.694d80a3e1f00011 was admitted already
	// map[alice:70 bob:30]
}
