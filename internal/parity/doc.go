// Package parity holds the test that keeps the two backend packages,
// etcdlock and zklock, mirror images of each other: the same exported
// names, the same method sets on the same types, but for a short,
// commented list of intended differences.
package parity
