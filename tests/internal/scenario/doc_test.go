// Package scenario_test plays the seed chapter's scenario end to end, with
// real processes: lock holders in child processes (integration.Holder) on
// real etcd clusters and ZooKeeper ensembles, writing through a fence to
// an HTTP resource in the test process. A holder stopped past its TTL, or
// whose write is held in flight while its lock is lost, is refused by the
// resource once its successor has written; healthy contenders are all
// admitted, in token order.
package scenario_test
