package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/snapshot"
	"go.uber.org/zap"
)

// Backups and restores, the way operators take them: an etcd snapshot
// saved over the client API and restored with etcdutl, a copy of a stopped
// ZooKeeper server's data directory put back in place. A restore rolls
// the cluster's revisions or zxids back to the backup's, so that numbers
// issued after the backup are issued again; tests of fencing tokens use it
// (see distlock.Token).

// DataDir returns the member's data directory (--data-dir).
func (m *EtcdMember) DataDir() string { return filepath.Join(m.c.dir, m.Name) }

// SaveSnapshot saves a snapshot of member i's keyspace to path, as
// "etcdctl snapshot save" does (over the client API, bypassing the
// member's proxy), and returns the server's version.
func (c *EtcdCluster) SaveSnapshot(ctx context.Context, i int, path string) (string, error) {
	m := c.Members[i]
	cfg := clientv3.Config{Endpoints: []string{"http://" + m.clientAddr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	v, err := snapshot.SaveWithVersion(ctx, zap.NewNop(), cfg, path)
	if err != nil {
		return "", fmt.Errorf("integration: snapshot of %s: %w", m.Name, err)
	}
	return v, nil
}

// EtcdRestore says how RestoreSnapshot restores: the options of
// "etcdutl snapshot restore" that move the restored cluster's revisions
// on.
type EtcdRestore struct {
	// BumpRevision is --bump-revision: how much to add to the snapshot's
	// revision, so that revisions issued after the snapshot are not
	// issued again. 0 restores the snapshot's revision as it is.
	BumpRevision uint64
	// MarkCompacted is --mark-compacted (etcdutl requires it with a
	// bump): watches from revisions before the restore fail with
	// "compacted", so clients do not wait on events that were lost.
	MarkCompacted bool
}

// RestoreSnapshot restores the whole cluster from the snapshot file at
// path, the procedure etcd documents for disaster recovery: it kills every
// member, restores each member's data directory from the snapshot with
// "etcdutl snapshot restore" (the same member names, peer URLs and cluster
// token, so the proxies and clients go on working), starts the members
// again and waits until the cluster is healthy. etcdutl is built from the
// module proxy at the version in go.mod, like the server.
//
// The keyspace, its revision and the leases are the snapshot's: keys
// written after the snapshot are gone, and without BumpRevision the
// revisions issued after the snapshot are issued again.
func (c *EtcdCluster) RestoreSnapshot(ctx context.Context, path string, r EtcdRestore) error {
	bin, err := buildBinary(ctx, "integration/internal/etcdutl")
	if err != nil {
		return err
	}
	var initial []string
	for _, m := range c.Members {
		initial = append(initial, fmt.Sprintf("%s=http://%s", m.Name, m.peerProxy.Addr()))
	}
	for i := range c.Members {
		if err := c.Kill(i); err != nil {
			return fmt.Errorf("integration: restore: kill %s: %w", c.Members[i].Name, err)
		}
	}
	for _, m := range c.Members {
		data := m.DataDir()
		if err := os.RemoveAll(data); err != nil {
			return err
		}
		args := []string{"snapshot", "restore", path,
			"--name", m.Name,
			"--data-dir", data,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-token", filepath.Base(c.dir),
			"--initial-advertise-peer-urls", "http://" + m.peerProxy.Addr(),
		}
		if r.BumpRevision > 0 {
			args = append(args, "--bump-revision", strconv.FormatUint(r.BumpRevision, 10))
		}
		if r.MarkCompacted {
			args = append(args, "--mark-compacted")
		}
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("integration: etcdutl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		c.cfg.logger.Info("integration: etcd member restored from a snapshot", "member", m.Name, "snapshot", path, "bump", r.BumpRevision)
	}
	for i := range c.Members {
		if err := c.Members[i].run(); err != nil {
			return err
		}
	}
	return c.WaitHealthy(ctx)
}

// DataDir returns the server's data directory (dataDir in zoo.cfg: myid,
// and the snapshots and transaction logs under version-2).
func (s *ZooKeeperServer) DataDir() string { return filepath.Join(s.dir, "data") }

// SaveData copies server i's data directory to dst, which must not exist:
// a backup of the server. Kill the server first: a copy of a running
// server's files may catch a transaction log half written.
func (e *ZooKeeperEnsemble) SaveData(i int, dst string) error {
	s := e.Servers[i]
	if s.srv.pid() != 0 {
		return fmt.Errorf("integration: save data of %s: the server runs; kill it first", s.Name)
	}
	if err := copyDir(dst, s.DataDir()); err != nil {
		return fmt.Errorf("integration: save data of %s: %w", s.Name, err)
	}
	return nil
}

// RestoreData replaces server i's data directory by a copy of src (made by
// SaveData): the server, started again with Restart, comes back with the
// backup's data, sessions and zxid. Kill the server first.
func (e *ZooKeeperEnsemble) RestoreData(i int, src string) error {
	s := e.Servers[i]
	if s.srv.pid() != 0 {
		return fmt.Errorf("integration: restore data of %s: the server runs; kill it first", s.Name)
	}
	if err := os.RemoveAll(s.DataDir()); err != nil {
		return err
	}
	if err := copyDir(s.DataDir(), src); err != nil {
		return fmt.Errorf("integration: restore data of %s: %w", s.Name, err)
	}
	e.cfg.logger.Info("integration: ZooKeeper data restored from a copy", "server", s.Name, "copy", src)
	return nil
}

// copyDir copies the regular files and directories below src to dst,
// which must not exist yet.
func copyDir(dst, src string) error {
	if _, err := os.Stat(dst); err == nil {
		return fmt.Errorf("%s exists", dst)
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case !d.Type().IsRegular():
			return errors.New("not a regular file: " + p)
		}
		return copyFile(to, p)
	})
}

func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// SetEpoch writes epoch into server i's acceptedEpoch and currentEpoch
// files (dataDir/version-2), the ZooKeeper counterpart of etcdutl's
// --bump-revision: started again, the ensemble elects a leader of epoch
// epoch+1 or later, whose zxids (the epoch is their top 32 bits) are above
// every zxid of epochs up to epoch. Kill the server first. Only an
// ensemble of several servers runs epochs: a standalone server does not
// read these files.
func (e *ZooKeeperEnsemble) SetEpoch(i int, epoch int64) error {
	s := e.Servers[i]
	if s.srv.pid() != 0 {
		return fmt.Errorf("integration: set epoch of %s: the server runs; kill it first", s.Name)
	}
	dir := filepath.Join(s.DataDir(), "version-2")
	for _, f := range []string{"acceptedEpoch", "currentEpoch"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(strconv.FormatInt(epoch, 10)), 0o644); err != nil {
			return fmt.Errorf("integration: set epoch of %s: %w", s.Name, err)
		}
	}
	return nil
}
