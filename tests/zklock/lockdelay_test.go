package zklock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
)

// TestWithLockDelayNegative: a negative lock-delay is refused before the
// store is asked anything.
func TestWithLockDelayNegative(t *testing.T) {
	_, err := zklock.NewSession(context.Background(), nil, recipe.WithLockDelay(-time.Second))
	if !errors.Is(err, distlock.ErrInvalidOption) {
		t.Fatalf("NewSession with a negative lock-delay: %v, want distlock.ErrInvalidOption", err)
	}
}
