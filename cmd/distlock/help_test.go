package main

import (
	"flag"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ownFlags are each command's flags, as its --help must list them: its
// own and no other command's.
var ownFlags = map[string][]string{
	"run":    append([]string{"lock", "wait", "no-wait", "shell", "grace", "permits", "compat", "revocable", "ttl", "zk-tick", "log-level"}, clusterFlags...),
	"once":   append([]string{"lock", "wait", "shell", "grace", "slot", "every", "tz", "at-most-once", "ttl", "zk-tick", "log-level"}, clusterFlags...),
	"status": append([]string{"json", "watch", "fence", "changes"}, clusterFlags...),
	"revoke": append([]string{"reason", "grace", "force", "by", "compat"}, clusterFlags...),
	"demo":   {"backend", "zk", "zk-timeout"},
}

// helpFlags returns the flags a help text lists (lines "  --name ..."
// from its "Flags:" on).
func helpFlags(help string) []string {
	var out []string
	if i := strings.Index(help, "\nFlags:\n"); i >= 0 {
		help = help[i:]
	} else if i := strings.Index(help, "\nCluster flags"); i >= 0 {
		help = help[i:]
	}
	for _, m := range regexp.MustCompile(`(?m)^  --([a-z-]+)`).FindAllStringSubmatch(help, -1) {
		out = append(out, m[1])
	}
	return out
}

// helpCodes returns the codes an "Exit status:" or "Exit codes" section
// lists.
func helpCodes(t *testing.T, help, heading string) []string {
	t.Helper()
	i := strings.Index(help, heading)
	if i < 0 {
		t.Fatalf("no %q in\n%s", heading, help)
	}
	var out []string
	for _, line := range strings.Split(help[i:], "\n")[1:] {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		if f := strings.Fields(line); !strings.HasPrefix(line, "   ") && len(f) > 0 {
			out = append(out, f[0])
		}
	}
	return out
}

// TestHelpPerCommand: each command's --help lists its own flags only,
// spelled --flag, and its own exit codes only; the top-level table is
// not appended.
func TestHelpPerCommand(t *testing.T) {
	ctx := testCtx(t)
	for cmd, flags := range ownFlags {
		t.Run(cmd, func(t *testing.T) {
			r := cli(ctx, t, nil, cmd, "--help")
			if r.code != 0 {
				t.Fatalf("%s --help: exit %d, stderr %q", cmd, r.code, r.stderr)
			}
			got := helpFlags(r.stdout)
			slices.Sort(got)
			want := slices.Clone(flags)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s --help lists flags %q, want %q", cmd, got, want)
			}
			if m := regexp.MustCompile(`(?m)^\s+-[a-z]`).FindString(r.stdout); m != "" {
				t.Errorf("%s --help spells a flag with one dash: %q", cmd, m)
			}
			if strings.Contains(r.stdout, "Exit codes") || strings.Count(r.stdout, "Exit status:") != 1 {
				t.Errorf("%s --help: want one \"Exit status:\" section and not the top-level table:\n%s", cmd, r.stdout)
			}
			if codes := helpCodes(t, r.stdout, "Exit status:"); !slices.Equal(codes, exitCodesOf(cmd)) {
				t.Errorf("%s --help lists exit codes %q, want %q", cmd, codes, exitCodesOf(cmd))
			}
			// Its own words: no "run, once:" of the top-level table.
			if exits := r.stdout[strings.Index(r.stdout, "Exit status:"):]; strings.Contains(exits, "run, once:") {
				t.Errorf("%s --help: the exit codes speak of other commands:\n%s", cmd, exits)
			}
		})
	}
	// status and revoke have no session: no --ttl.
	for _, cmd := range []string{"status", "revoke"} {
		if r := cli(ctx, t, nil, cmd, "--help"); strings.Contains(r.stdout, "--ttl") || strings.Contains(r.stdout, "--log-level") {
			t.Errorf("%s --help mentions --ttl or --log-level", cmd)
		}
		if r := cli(ctx, t, []string{"ETCDCTL_ENDPOINTS="}, cmd, "--ttl=5s", "--etcd=127.0.0.1:1", "--reason=r", "x"); r.code != exitUsage || !strings.Contains(r.stderr, "not defined: -ttl") {
			t.Errorf("%s --ttl: exit %d, stderr %q; want a usage error", cmd, r.code, r.stderr)
		}
	}
}

// TestHelpExitCodes: the top-level --help has the whole table, every code
// the command exits with is in it, and every command's rows are in it.
func TestHelpExitCodes(t *testing.T) {
	r := cli(testCtx(t), t, nil, "--help")
	codes := helpCodes(t, r.stdout, "Exit codes:")
	var all []string
	for _, row := range exitTable {
		all = append(all, row.code)
	}
	if !slices.Equal(codes, all) {
		t.Errorf("--help lists exit codes %q, want %q", codes, all)
	}
	for _, c := range []int{exitOK, exitFailure, exitUsage, exitDataErr, exitUnreachable, exitNotAcquired, exitLost, exitCannotRun, exitNotFound} {
		if !slices.ContainsFunc(exitTable, func(row exitDoc) bool { return row.code == strconv.Itoa(c) }) {
			t.Errorf("exit code %d is not in the table", c)
		}
	}
	for _, row := range exitTable {
		for cmd := range row.cmds {
			if _, ok := ownFlags[cmd]; !ok {
				t.Errorf("code %s: unknown command %q", row.code, cmd)
			}
		}
	}
}

// TestHelpFlagDefaults: the flag lists print defaults as PrintDefaults
// would, but never one from the environment (a password).
func TestHelpFlagDefaults(t *testing.T) {
	r := cli(testCtx(t), t, []string{"ETCDCTL_PASSWORD=hunter2", "DISTLOCK_ZK_AUTH=app:secret"}, "run", "--help")
	for _, secret := range []string{"hunter2", "app:secret"} {
		if strings.Contains(r.stdout, secret) {
			t.Errorf("run --help shows %q from the environment", secret)
		}
	}
	text := strings.Join(strings.Fields(r.stdout), " ")
	for _, want := range []string{"(default 15s)", "(default 5s)", `(default "off")`, "(default true)"} {
		if !strings.Contains(text, want) {
			t.Errorf("run --help lacks %q", want)
		}
	}
	// The printer against a FlagSet of known flags.
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Duration("every", time.Minute, "how often")
	fs.Bool("loud", false, "shout")
	var b strings.Builder
	printHelp(&b, "status", "Usage: x\n", fs)
	if !strings.Contains(b.String(), "  --every duration\n        how often (default 1m0s)\n") || !strings.Contains(b.String(), "  --loud\n        shout\n") {
		t.Errorf("printHelp:\n%s", b.String())
	}
}

// TestUsageErrorNames: a usage error is one line that names the flag at
// fault first, without stacked prefixes ("once: --slot: distlock:
// slot ..."), and --ttl is checked before what derives from it.
func TestUsageErrorNames(t *testing.T) {
	ctx := testCtx(t)
	env := []string{"ETCDCTL_ENDPOINTS=", "DISTLOCK_ZK=", "ETCDCTL_CACERT=", "ETCDCTL_CERT=", "ETCDCTL_KEY="}
	const e = "--etcd=127.0.0.1:1"
	for _, tc := range []struct {
		args []string
		want string // the message's start, after "distlock: "
	}{
		{[]string{"once", e, "--lock", "x", "--slot", "a b", "--", "true"}, `--slot "a b": character ' '`},
		{[]string{"once", e, "--lock", "x", "--slot", "", "--", "true"}, `--slot "": empty`},
		{[]string{"run", e, "--lock", "x", "--ttl", "-5s", "--", "true"}, "--ttl -5s: want a positive duration"},
		{[]string{"once", e, "--lock", "x", "--slot", "s", "--ttl", "0s", "--", "true"}, "--ttl 0s: want a positive duration"},
		{[]string{"run", e, "--lock", "x", "--ttl", "1s", "--", "true"}, "--ttl 1s is below etcd's minimum"},
		{[]string{"run", e, "--lock", "x", "--ttl", "4s", "--grace", "5s", "--", "true"}, "--grace 5s is not below --ttl 4s"},
		{[]string{"run", e, "--lock", "x", "--grace", "-1s", "--", "true"}, "--grace -1s: want a duration ≥ 0"},
		{[]string{"run", e, "--lock", "a//b", "--", "true"}, `--lock "a//b": invalid lock name`},
		{[]string{"run", e, "--lock", "x", "--wait", "0s", "--", "true"}, "--wait 0s: want a positive duration"},
		{[]string{"run", e, "--lock", "x", "--permits", "0", "--", "true"}, "--permits 0: want 1 to"},
		{[]string{"run", e, "--lock", "x", "--log-level", "loud", "--", "true"}, `--log-level "loud": want debug, info, warn, error or off`},
		{[]string{"run", e, "--lock", "x", "--dial-timeout", "0s", "--", "true"}, "--dial-timeout 0s: want a positive duration"},
		{[]string{"run", "--zk=127.0.0.1:1", "--cacert", "/dev/null", "--lock", "x", "--", "true"}, "--cacert, --cert and --key are for etcd"},
		{[]string{"once", e, "--lock", "x", "--every", "fortnightly", "--", "true"}, `--every "fortnightly": not hourly, daily or a cron expression`},
		{[]string{"status", e, "--changes", "2", "x"}, "--changes 2: wants --watch"},
		{[]string{"status", e, "a//b"}, `lock "a//b": invalid lock name`},
		{[]string{"revoke", e, "--reason", "r", "--grace", "-1s", "x"}, "--grace -1s: want a duration ≥ 0"},
		{[]string{"demo", "--backend", "redis"}, `--backend "redis": want etcd or zk`},
	} {
		r := cli(ctx, t, env, tc.args...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "distlock: "+tc.want) || strings.Count(r.stderr, "\n") != 1 || strings.Count(r.stderr, "distlock:") != 1 {
			t.Errorf("%q: exit %d, stderr %q; want %d and one line starting %q", tc.args, r.code, r.stderr, exitUsage, "distlock: "+tc.want)
		}
	}
}

// TestLogLevel: --log-level turns the library's log lines on, on stderr;
// by default there are none.
func TestLogLevel(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		ctx := testCtx(t)
		lock := lockName(t)
		pkg := map[string]string{"etcd": "etcdlock", "zk": "zklock"}[b.name]
		r := cli(ctx, t, nil, b.args("run", "--log-level", "debug", "--lock", lock, "--", "true")...)
		if r.code != 0 || !regexp.MustCompile(`(?m)^time=\S+ level=DEBUG msg="`+pkg+`: acquired" .*lock=`+regexp.QuoteMeta(lock)+` `).MatchString(r.stderr) {
			t.Errorf("run --log-level debug: exit %d, stderr %q; want the library's debug lines", r.code, r.stderr)
		}
		r = cli(ctx, t, nil, b.args("once", "--log-level", "debug", "--lock", lock, "--slot", "log-1", "--", "true")...)
		if r.code != 0 || !strings.Contains(r.stderr, "level=DEBUG") {
			t.Errorf("once --log-level debug: exit %d, stderr %q", r.code, r.stderr)
		}
		r = cli(ctx, t, nil, b.args("run", "--log-level", "warn", "--lock", lock, "--", "true")...)
		if r.code != 0 || strings.Contains(r.stderr, "level=DEBUG") || strings.Contains(r.stderr, "level=INFO") {
			t.Errorf("run --log-level warn: exit %d, stderr %q; want no debug or info lines", r.code, r.stderr)
		}
		r = cli(ctx, t, nil, b.args("run", "--lock", lock, "--", "true")...)
		if r.code != 0 || r.stderr != "" {
			t.Errorf("run without --log-level: exit %d, stderr %q; want nothing", r.code, r.stderr)
		}
	})
}

// TestStatusSemaphore: status shows a semaphore's holders by slot and its
// waiter as counted (not exclusive), each with its whole token; revoke
// asks the holder only.
func TestStatusSemaphore(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		ctx := testCtx(t)
		lock := lockName(t)
		holder := start(ctx, t, b.args("run", "--lock", lock, "--permits", "1", "--", "sh", "-c", `echo "$DISTLOCK_TOKEN"; read x`)...)
		token := holder.nextLine(ctx, "the holder's token")
		waiter := start(ctx, t, b.args("run", "--lock", lock, "--permits", "1", "--", "true")...)
		b.waitQueued(t, lock, 2)

		r := cli(ctx, t, nil, b.args("status", lock)...)
		t.Logf("status:\n%s", r.stdout)
		if r.code != 0 || !regexp.MustCompile(`(?m)^1\s+holder\s+slot 0\s+`+regexp.QuoteMeta(token)+`\s`).MatchString(r.stdout) ||
			!regexp.MustCompile(`(?m)^2\s+waiting\s+counted\s+`+regexp.QuoteMeta(lock)+`@[1-9][0-9]*\.[0-9a-f]+\s`).MatchString(r.stdout) {
			t.Errorf("status: exit %d, stdout %q; want the holder as slot 0 with token %s, the waiter as counted with its token", r.code, r.stdout, token)
		}
		st := parseStatus(t, cli(ctx, t, nil, b.args("status", "--json", lock)...))
		if len(st.Entries) != 2 || st.Entries[0].Kind != "slot 0" || st.Entries[0].Token != token || st.Entries[1].Kind != "counted" || st.Entries[1].Role != "waiting" {
			t.Errorf("status --json entries: %+v", st.Entries)
		}
		// revoke asks the holder, not the waiter, to let go.
		r = cli(ctx, t, nil, b.args("revoke", "--reason", "semaphore", "--grace", "30s", lock)...)
		t.Logf("revoke: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); r.code != 0 || len(lines) != 1 || !strings.HasPrefix(lines[0], "token "+token+" ") || !strings.Contains(lines[0], "released") {
			t.Errorf("revoke of a semaphore with a waiter: exit %d, stdout %q; want the holder's token %s only, released", r.code, r.stdout, token)
		}
		if code := holder.wait(time.Minute); code != 128+15 {
			t.Errorf("revoked holder exited %d, want 143 (its command got SIGTERM); stderr %s", code, holder.stderr)
		}
		if code := waiter.wait(time.Minute); code != 0 {
			t.Errorf("waiter exited %d; stderr %s", code, waiter.stderr)
		}
	})
}
