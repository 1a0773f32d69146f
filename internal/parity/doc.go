// Package parity holds the test that keeps the two backend packages,
// etcdlock and zklock, mirror images of each other: the same exported
// names, the same method sets (names and signatures) on the same types,
// but for a short, commented list of intended differences; the tests that
// keep their generated methods (internal/recipegen) up to date; and the
// one that every method a user can call is documented by go doc in a
// public package.
package parity
