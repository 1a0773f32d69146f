package main

import (
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/integration"
	"github.com/go-zookeeper/zk"
)

// The cluster flags as deployments use them: etcdctl's environment
// variables, etcd user/password auth, ZooKeeper digest auth and a chroot.

func TestConnEnvironmentDefaults(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	b := etcdBackend(t)
	lock := lockName(t)
	env := []string{"ETCDCTL_ENDPOINTS=" + strings.Join(etcdCluster(t).Endpoints(), ","), "DISTLOCK_ZK="}
	r := cli(ctx, t, env, "run", "--prefix="+b.prefix, "--lock", lock, "--", "sh", "-c", `echo "$DISTLOCK_TOKEN"`)
	if r.code != 0 || !strings.HasPrefix(r.stdout, lock+"@") {
		t.Fatalf("run with $ETCDCTL_ENDPOINTS: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = cli(ctx, t, append(env, "DISTLOCK_ZK=127.0.0.1:1"), "run", "--lock", lock, "--", "true")
	if r.code != exitUsage || !strings.Contains(r.stderr, "both --etcd and --zk") {
		t.Fatalf("both clusters from the environment: code %d, stderr %q", r.code, r.stderr)
	}
}

func TestConnEtcdAuth(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	// A cluster of its own: enabling auth changes it for every client.
	c := integration.NewEtcd(t, integration.WithSize(1))
	cli0, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli0.Close()
	for _, step := range []func() error{
		func() error { _, err := cli0.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := cli0.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli0.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("enable etcd auth: %v", err)
		}
	}
	etcd := "--etcd=" + strings.Join(c.Endpoints(), ",")
	lock := lockName(t)
	r := cli(ctx, t, nil, "run", etcd, "--user", "root:rootpw", "--lock", lock, "--", "true")
	if r.code != 0 {
		t.Fatalf("run with --user root:password: code %d, stderr %q", r.code, r.stderr)
	}
	r = cli(ctx, t, []string{"ETCDCTL_USER=root", "ETCDCTL_PASSWORD=rootpw"}, "run", etcd, "--lock", lock, "--", "true")
	if r.code != 0 {
		t.Fatalf("run with $ETCDCTL_USER/$ETCDCTL_PASSWORD: code %d, stderr %q", r.code, r.stderr)
	}
	r = cli(ctx, t, nil, "run", etcd, "--lock", lock, "--", "true")
	if r.code != exitUnreachable || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "--user") {
		t.Fatalf("run without credentials on an auth-enabled cluster: code %d, stderr %q", r.code, r.stderr)
	}
	r = cli(ctx, t, nil, "run", etcd, "--user", "root:wrong", "--lock", lock, "--", "true")
	if r.code != exitUnreachable || !strings.Contains(r.stderr, "authentication failed") {
		t.Fatalf("run with a wrong password: code %d, stderr %q", r.code, r.stderr)
	}
}

func TestConnZooKeeperAuthAndChroot(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	zkb := zkBackend(t)
	lock := lockName(t)
	chroot := "/chroot-" + lock
	holder := start(ctx, t, "run", zkFlag(t), "--zk-auth", "app:secret", "--zk-chroot", chroot, "--lock", lock, "--",
		"sh", "-c", "echo ready; read x; exit 0")
	holder.waitLine(ctx, "ready")

	// The entry lives under the chroot, readable only with the digest.
	authed := zkb.ens()
	if err := authed.AddAuth("digest", []byte("app:secret")); err != nil {
		t.Fatal(err)
	}
	dir := chroot + "/distlock/" + lock
	children, _, err := authed.Children(dir)
	if err != nil || len(children) != 1 {
		t.Fatalf("children of %s: %v (%v), want the holder's entry", dir, children, err)
	}
	acl, _, err := authed.GetACL(dir + "/" + children[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(acl) != 1 || acl[0].Scheme != "digest" || !strings.HasPrefix(acl[0].ID, "app:") {
		t.Fatalf("entry ACL %v, want a digest ACL for app", acl)
	}
	if _, _, err := zkb.zk.Get(dir + "/" + children[0]); err != zk.ErrNoAuth {
		t.Fatalf("reading the entry without credentials: %v, want ErrNoAuth", err)
	}
	// status sees it through the same flags.
	r := cli(ctx, t, nil, "status", zkFlag(t), "--zk-auth", "app:secret", "--zk-chroot", chroot, lock)
	if r.code != 0 || !strings.Contains(r.stdout, "held (1 holder") {
		t.Fatalf("status: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	holder.stdin.Close()
	if code := holder.wait(30 * time.Second); code != 0 {
		t.Fatalf("holder exited %d", code)
	}
}
