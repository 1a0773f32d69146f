// Package integration runs real servers for tests, and breaks them on
// purpose: etcd clusters (EtcdCluster), ZooKeeper ensembles
// (ZooKeeperEnsemble) and PostgreSQL servers (Postgres), started on this
// machine's loopback, never mocked. distlock's own tests and its fault
// suite (package chaos) use it, and so can any program's tests: NewEtcd,
// NewZooKeeper and NewPostgres start a server for a test and stop it when
// the test ends; StartEtcd, StartZooKeeper and StartPostgres do the same
// outside a test, and Close stops them. Holder holds a lock in a child
// process, which a test can pause past its TTL.
//
// # How servers run
//
// There is no in-process server: each server is a process of its own,
// which a fault can stop or kill. WithProvider chooses what runs it:
// Processes (the default) runs it as a child process of the test (killed
// with it, through Pdeathsig), Containers in a Docker container on the
// host's network, through testcontainers-go. The images are built on this
// machine FROM scratch, from this machine's files, and never pulled, so a
// Docker engine with no registry will do; CheckContainers says whether an
// engine answers. testcontainers' reaper, Ryuk, is off (its image would be
// pulled): the harness labels its containers (ContainerLabel) and removes
// them itself, those of an interrupted run included.
//
// WithSize sets the number of servers (3 by default), WithLogger shows
// what the harness does, and for etcd WithTLS and WithAuth turn on TLS
// (with certificates the harness makes) and authentication.
//
// # Faults
//
// Every connection to a server, the other servers' included, goes through
// a Proxy of the harness, which tells the servers' connections apart by
// their sockets' owners in /proc. The faults:
//
//   - Cut(i) partitions server i: its proxies hold every byte to and from
//     it, connections stay open, and Heal(i) delivers what was held.
//   - Pause(i) and Resume(i) send SIGSTOP and SIGCONT, as a long GC pause.
//   - Kill(i) sends SIGKILL; Restart(i) starts the server again on its
//     data; StopLeader kills the leader.
//   - Network() drops or delays bytes, or holds one direction only.
//   - ZooKeeper clients made by Connect: DropConnection closes the TCP
//     connection under the client, HoldReplies holds the servers' answers
//     to that client alone, ExpireSession expires its session for real.
//   - Backups put back: SaveSnapshot and RestoreSnapshot (etcd), SaveData,
//     RestoreData and SetEpoch (ZooKeeper) roll revisions or zxids back.
//   - Membership changes: RemoveMember(i) takes server i out of the
//     configuration, stops it and wipes its data; AddMember(i) adds a
//     fresh server back in its place, with the same name and addresses
//     (ZooKeeper: on an ensemble started WithReconfig; see zkmember.go).
//
// A fault is verified before its method returns (Cut waits until the
// server notices, Pause until the process is stopped, Kill until it is
// gone); one that did not take effect returns an error wrapping
// ErrFaultNotVerified and fails the test of a cluster made by NewEtcd or
// NewZooKeeper: a partition test whose partition cut nothing must fail.
//
// # Finding the servers
//
// etcd is built from source, the etcd server module at the version in
// go.mod, fetched by the go command through the module proxy like any
// dependency: one static binary per source tree, cached in
// $DISTLOCK_CACHE (by default distlock/ in the user's cache directory).
// No etcd release is downloaded.
//
// ZooKeeper runs on java ($JAVA_HOME/bin/java, else java on PATH) with the
// jars of $ZOOKEEPER_CLASSPATH, else of $ZOOKEEPER_HOME or its lib/ (an
// Apache release), else of Debian's zookeeper package in /usr/share/java.
// PostgreSQL's binaries come from $PG_BINDIR, Debian's postgresql package
// or PATH.
//
// # Missing servers
//
// NewEtcd and NewZooKeeper fail the test when the cluster cannot start, a
// missing server included: they never skip. NewPostgres skips a test when
// PostgreSQL is not installed, unless CI is set in the environment
// (CI=true): under CI a missing server fails, never skips. The package's
// tests of the Containers provider apply that rule to CheckContainers.
package integration
