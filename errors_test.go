package distlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/distlock/distlock"
)

// TestLockErrorText: a LockError names the library, the backend and the
// lock once each; a OnceError whose cause is a LockError of its lock
// names them once too.
func TestLockErrorText(t *testing.T) {
	hold := &distlock.LockError{Backend: "etcd", Name: "ledger", Op: distlock.OpHold, Err: distlock.ErrLost}
	lock := &distlock.LockError{Backend: "zookeeper", Name: "ledger", Op: distlock.OpLock, Err: context.Canceled}
	for _, c := range []struct {
		err  error
		want string
	}{
		{hold, `distlock: etcd lock "ledger": hold: lock lost`},
		{&distlock.LockError{Name: "ledger", Op: distlock.OpValidate, Err: distlock.ErrInvalidName}, `distlock: lock "ledger": validate: invalid lock name`},
		{&distlock.OnceError{Name: "ledger", Slot: "s1", Op: distlock.OpLock, Err: lock}, `distlock: zookeeper lock "ledger", slot "s1": lock: context canceled; fn was not run`},
		{&distlock.OnceError{Name: "ledger", Slot: "s1", Op: distlock.OpMark, Err: hold}, `distlock: etcd lock "ledger" lost before slot "s1" was marked; fn was not run: hold: lock lost`},
		{&distlock.OnceError{Name: "other", Slot: "s1", Op: distlock.OpLock, Err: lock}, `distlock: lock "other", slot "s1": lock: distlock: zookeeper lock "ledger": lock: context canceled; fn was not run`},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
	var le *distlock.LockError
	if oe := (&distlock.OnceError{Name: "ledger", Slot: "s1", Op: distlock.OpLock, Err: lock}); !errors.As(oe, &le) || le != lock || !errors.Is(oe, context.Canceled) {
		t.Errorf("OnceError does not unwrap to its LockError")
	}
}

// TestLongNameCut: a 5,000-byte name passed by mistake is cut to its
// first 64 bytes and its length in every message that names it, and kept
// whole in the error's Name; every valid name appears whole.
func TestLongNameCut(t *testing.T) {
	long := strings.Repeat("n", 5000)
	cut := `"` + strings.Repeat("n", 64) + `"…(5000 bytes)`
	check := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		msg := err.Error()
		if len(msg) > 400 || !strings.Contains(msg, cut) {
			t.Errorf("%s: %d-byte message %.300q..., want the name cut to %s", what, len(msg), msg, cut)
		}
		var le *distlock.LockError
		if !errors.As(err, &le) || le.Name != long && !strings.Contains(le.Name, long) {
			t.Errorf("%s: the LockError does not keep the name whole", what)
		}
		if !errors.Is(err, distlock.ErrInvalidName) {
			t.Errorf("%s: %v does not match ErrInvalidName", what, err)
		}
	}
	check("ValidateName", distlock.ValidateName(long))
	_, err := distlock.ValidateNames([]string{"a", long})
	check("ValidateNames", err)
	check("Token.Validate", distlock.Token{Name: long, Seq: 1, Owner: 1}.Validate())
	_, err = distlock.ParseToken(long + "@1.1")
	if msg := err.Error(); !errors.Is(err, distlock.ErrInvalidToken) || len(msg) > 400 {
		t.Errorf("ParseToken of a long name: %d-byte message %.300q...", len(msg), msg)
	}
	check("a backend's LockError", &distlock.LockError{Backend: "etcd", Name: long, Op: distlock.OpValidate, Err: distlock.ErrInvalidName})

	oe := &distlock.OnceError{Name: long, Slot: "2026-12-04", Op: distlock.OpValidate, Err: distlock.ValidateName(long)}
	if msg := oe.Error(); len(msg) > 400 || !strings.Contains(msg, cut) || !errors.Is(oe, distlock.ErrInvalidName) {
		t.Errorf("OnceError: %d-byte message %.300q..., want the name cut to %s", len(msg), msg, cut)
	}

	valid := strings.Repeat("v", distlock.MaxNameLen)
	if msg := (&distlock.LockError{Name: valid, Op: distlock.OpLock, Err: distlock.ErrLocked}).Error(); !strings.Contains(msg, `"`+valid+`"`) {
		t.Errorf("a valid %d-byte name is not named whole: %s", len(valid), msg)
	}
}
