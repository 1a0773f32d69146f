// Package leasehook lets the queue-lock engine (internal/qlock) make held
// distlock.Lease values without package distlock exporting a constructor
// that users could misuse: distlock's init stores its unexported
// constructor here, and the engine, which imports distlock, asserts it to
// its concrete type. This package imports nothing of distlock's, so that
// distlock can import it.
package leasehook

// NewLease is distlock's newLease, of type
// func(distlock.Token, func(context.Context) error, func() time.Time) (*distlock.Lease, func(error)).
var NewLease any

// NewBackendLease is distlock's newBackendLease, of type
// func(backend string, distlock.Token, func(context.Context) error, func() time.Time) (*distlock.Lease, func(error)).
var NewBackendLease any

// NewPermit is distlock's newPermit, of type
// func(*distlock.Lease, int) *distlock.Permit.
var NewPermit any
