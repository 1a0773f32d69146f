// Package parity holds the tests that keep the public API in shape: the
// two store packages, etcdlock and zklock, mirror images of each other
// (the same exported names and session methods, but for a short,
// commented list of intended differences); package recipe's types
// forwarding every method of the engine's; and every method a user can
// call documented by go doc in a public package.
package parity
