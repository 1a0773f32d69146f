package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// How the harness lays out an ensemble (the servers' ports, their proxies
// and relays) and configures its servers: zoo.cfg, the log configurations
// and the JVM's command line.

// ZooKeeper's timing, in ticks of zkTick: fast enough that a fault test
// sees elections in about a second, slow enough that a busy machine does
// not make the servers drop each other.
const (
	zkTick      = 200 * time.Millisecond
	zkInitLimit = 20 // ticks a follower has to connect and sync to a leader
	zkSyncLimit = 5  // ticks a follower may lag (or be silent) before it is dropped
)

// ZooKeeperTickTime is the tickTime of the harness's ZooKeeper servers:
// pass it to zklock.WithTickTime so that a Session's client-side deadline
// is as late as these servers allow.
const ZooKeeperTickTime = zkTick

func (e *ZooKeeperEnsemble) start(ctx context.Context, java, cp string) error {
	n := e.cfg.size
	quorum := n > 1
	// Hold the servers' real ports until the proxies have theirs, so that
	// no proxy is given a port a server is about to bind.
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	reserve := func() (string, error) {
		l, err := serverListener()
		if err != nil {
			return "", err
		}
		held = append(held, l)
		return l.Addr().String(), nil
	}
	for i := range n {
		s := &ZooKeeperServer{node: node{Name: fmt.Sprintf("zk%d", i), procs: e.procs}, ID: i + 1, e: e}
		s.dir = filepath.Join(e.dir, s.Name)
		e.Servers = append(e.Servers, s)
		e.nodes = append(e.nodes, &s.node)
		var err error
		if s.clientAddr, err = reserve(); err != nil {
			return err
		}
		if !quorum {
			continue
		}
		if s.quorumAddr, err = reserve(); err != nil {
			return err
		}
		if s.electionAddr, err = reserve(); err != nil {
			return err
		}
	}
	for _, s := range e.Servers {
		var err error
		if s.clientProxy, err = e.newProxy(s.Name, s.clientAddr); err != nil {
			return err
		}
		if !quorum {
			continue
		}
		if s.quorumRelay, err = newPeerRelay(s.quorumAddr, nil); err != nil {
			return err
		}
		if s.quorumProxy, err = e.newPeerProxy(s, s.quorumAddr, s.quorumRelay.Addr()); err != nil {
			return err
		}
		if s.electionRelay, err = newPeerRelay(s.electionAddr, e.electionProxyAddr); err != nil {
			return err
		}
		if s.electionProxy, err = e.newPeerProxy(s, s.electionAddr, s.electionRelay.Addr()); err != nil {
			return err
		}
	}
	e.mu.Lock()
	e.electionAddrs = map[int64]string{}
	for _, s := range e.Servers {
		if s.electionProxy != nil {
			e.electionAddrs[int64(s.ID)] = s.electionProxy.Addr()
		}
	}
	e.mu.Unlock()
	for _, s := range e.Servers {
		data := filepath.Join(s.dir, "data")
		if err := os.MkdirAll(data, 0o755); err != nil {
			return err
		}
		logCfg, err := writeZooKeeperLogConfigs(s.dir)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(s.ID)+"\n"), 0o644); err != nil {
			return err
		}
		zooCfg := filepath.Join(s.dir, "zoo.cfg")
		if err := os.WriteFile(zooCfg, []byte(e.zooCfg(s, data)), 0o644); err != nil {
			return err
		}
		argv := []string{java,
			"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
			"-Djava.net.preferIPv4Stack=true",
			"-Djava.io.tmpdir=" + s.dir,
			"-Dzookeeper.log.dir=" + s.dir,
			"-Dzookeeper.jmx.log4j.disable=true",
			"-Dzookeeper.admin.enableServer=false",
			// A server that has looked for a leader in vain for a while
			// still retries every second, so it rejoins soon after a heal.
			"-Dzookeeper.fastleader.maxNotificationInterval=1000",
		}
		argv = append(argv, logCfg...)
		reconfigFlags, err := e.reconfigJVMFlags(s)
		if err != nil {
			return err
		}
		argv = append(argv, reconfigFlags...)
		argv = append(argv, "-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", zooCfg)
		srv, err := e.cfg.newServer(serverSpec{
			name: s.Name,
			argv: argv,
			log:  filepath.Join(e.dir, s.Name+".log"),
			dirs: []string{s.dir},
		})
		if err != nil {
			return err
		}
		s.srv = srv
	}
	for _, l := range held {
		l.Close()
	}
	held = nil
	for _, s := range e.Servers {
		if err := s.run(); err != nil {
			return err
		}
	}
	e.cfg.logger.Info("integration: ZooKeeper ensemble starting", "servers", n, "dir", e.dir, "provider", e.cfg.provider)
	wctx, cancel := e.untilExit(ctx)
	defer cancel(nil)
	return e.WaitHealthy(wctx)
}

// zooCfg is server s's configuration: its own entry with the ports it
// binds, the others' with their proxies' ports (see serverLine).
func (e *ZooKeeperEnsemble) zooCfg(s *ZooKeeperServer, data string) string {
	host, port, _ := net.SplitHostPort(s.clientAddr)
	lines := []string{
		"tickTime=" + strconv.Itoa(int(zkTick/time.Millisecond)),
		"initLimit=" + strconv.Itoa(zkInitLimit),
		"syncLimit=" + strconv.Itoa(zkSyncLimit),
		"dataDir=" + data,
		"clientPortAddress=" + host,
		"clientPort=" + port,
		"maxClientCnxns=0",
		"minSessionTimeout=" + strconv.Itoa(int(2*zkTick/time.Millisecond)),
		"maxSessionTimeout=60000",
		"admin.enableServer=false",
		"4lw.commands.whitelist=*",
		// Tests need no fsync: a killed process's writes survive in the
		// page cache, and a machine crash ends the test anyway.
		"forceSync=no",
		"preAllocSize=1024",
	}
	if len(e.Servers) > 1 {
		lines = append(lines,
			"standaloneEnabled=false",
			"reconfigEnabled="+strconv.FormatBool(e.cfg.reconfig),
			"quorumListenOnAllIPs=false",
		)
		for _, o := range e.Servers {
			lines = append(lines, e.serverLine(o, s))
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// writeZooKeeperLogConfigs writes log configurations that send the
// servers' logs to standard output (the server's log file) at WARN, with
// the servers' state changes at INFO: log4j 1.2 for Debian's package,
// logback for an Apache release. It returns the JVM flags that use them.
func writeZooKeeperLogConfigs(dir string) ([]string, error) {
	const pattern = "%d{ISO8601} [myid:%X{myid}] %-5p [%t:%C{1}@%L] - %m%n"
	log4j := strings.Join([]string{
		"log4j.rootLogger=WARN, CONSOLE",
		"log4j.logger.org.apache.zookeeper.server.quorum.QuorumPeer=INFO",
		"log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender",
		"log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout",
		"log4j.appender.CONSOLE.layout.ConversionPattern=" + pattern,
	}, "\n") + "\n"
	logback := `<configuration>
  <appender name="CONSOLE" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>` + pattern + `</pattern></encoder>
  </appender>
  <logger name="org.apache.zookeeper.server.quorum.QuorumPeer" level="INFO"/>
  <root level="WARN"><appender-ref ref="CONSOLE"/></root>
</configuration>
`
	l4, lb := filepath.Join(dir, "log4j.properties"), filepath.Join(dir, "logback.xml")
	if err := os.WriteFile(l4, []byte(log4j), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(lb, []byte(logback), 0o644); err != nil {
		return nil, err
	}
	return []string{"-Dlog4j.configuration=file:" + l4, "-Dlogback.configurationFile=" + lb}, nil
}
