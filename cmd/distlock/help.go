package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// The exit codes are documented once, here: the top-level --help prints
// the whole table, each command's --help only the rows it can exit with,
// in its own words where they differ. TestHelpExitCodes checks every
// command's list against this table.

// exitDoc is one row of the exit-code table.
type exitDoc struct {
	code string // "0", "N", "64", "128+N", ...
	what string // the top-level table's text
	// cmds are the commands that exit with code, and what it means for
	// each ("" when what says it).
	cmds map[string]string
}

var exitTable = []exitDoc{
	{"0", "success", map[string]string{
		"run":    "COMMAND ran and exited 0",
		"once":   "COMMAND ran and exited 0, or SLOT was done already (nothing ran)",
		"status": "the queue was shown, free or held (--watch: until interrupted, or --changes shown)",
		"revoke": "every holder (an election's leader too) released within the grace period or was forced, or the lock was free (nothing to do)",
		"demo":   "the demo ran to its end",
	}},
	{"N", "run, once: COMMAND's own exit code when it ran and failed (128+signal if a signal ended it)", map[string]string{
		"run":  "COMMAND's own exit code when it failed (128+signal if a signal ended it), also when a signal distlock passed on or a revocation stopped it",
		"once": "COMMAND's own exit code when it failed (128+signal if a signal ended it); with --at-most-once the slot counts as done all the same",
	}},
	{"1", "an unexpected error that none of the codes below covers", map[string]string{
		"run": "", "once": "", "status": "", "revoke": "", "demo": "the demo failed (the message says where)",
	}},
	{"64", "usage error: bad flags or arguments (EX_USAGE)", map[string]string{
		"run": "", "once": "", "status": "", "revoke": "", "demo": "",
	}},
	{"65", "run --permits N: the semaphore's holders and waiters use another N; the line is well-formed but disagrees with the fleet (EX_DATAERR)", map[string]string{
		"run": "--permits N differs from the N the semaphore's holders and waiters use: give every line the same N (EX_DATAERR)",
	}},
	{"69", "the cluster could not be reached (refused, unknown host, no answer), refused the credentials, is not etcd or ZooKeeper, or failed a request (EX_UNAVAILABLE)", map[string]string{
		"run":    "",
		"once":   "the cluster could not be reached (refused, unknown host, no answer), refused the credentials, is not etcd or ZooKeeper, or failed a request, such as reading or writing the slot's marker (EX_UNAVAILABLE)",
		"status": "",
		"revoke": "the cluster could not be reached (refused, unknown host, no answer), refused the credentials, is not etcd or ZooKeeper, or failed while revoking (EX_UNAVAILABLE)",
		"demo":   "ZooKeeper (--backend zk) could not be reached, or this build has no embedded etcd (-tags noembedetcd)",
	}},
	{"75", "not now, try again later (EX_TEMPFAIL): run, once: the lock is held (--no-wait) or --wait elapsed; revoke: a holder still holds the lock after its grace period (rerun with --force)", map[string]string{
		"run":    "lock not acquired: --no-wait found it held, or --wait elapsed; also when it was revoked before COMMAND started (EX_TEMPFAIL)",
		"once":   "lock not acquired: --wait elapsed (EX_TEMPFAIL)",
		"revoke": "a holder still holds the lock after the grace period (this request's, or an earlier one's when it was revoked already) and --force was not given: rerun with --force to take it (EX_TEMPFAIL)",
	}},
	{"76", "run, once: the lock was lost while COMMAND ran; COMMAND was stopped", map[string]string{
		"run":  "the lock was lost while COMMAND ran (or a revocation of it was forced); COMMAND was stopped",
		"once": "the lock was lost while COMMAND ran, or before the slot was marked; COMMAND was stopped or not run",
	}},
	{"126", "run, once: COMMAND could not be run", map[string]string{
		"run": "COMMAND could not be run (not executable, say)", "once": "COMMAND could not be run (not executable, say)",
	}},
	{"127", "run, once: COMMAND was not found", map[string]string{"run": "COMMAND was not found", "once": "COMMAND was not found"}},
	{"128+N", "signal N stopped distlock before COMMAND ran: while connecting or waiting (nothing is left behind); revoke: while waiting (the request stays recorded)", map[string]string{
		"run":    "signal N (SIGINT, SIGTERM, SIGHUP) stopped distlock while connecting or waiting for the lock: nothing is left behind",
		"once":   "signal N (SIGINT, SIGTERM, SIGHUP) stopped distlock while connecting or waiting for the lock: nothing is left behind",
		"revoke": "signal N (SIGINT, SIGTERM, SIGHUP) stopped the wait; the request stays recorded, and holders that follow revocations still see it",
		"demo":   "interrupted (Ctrl-C or SIGTERM: always 130); the worker was stopped and the demo's data removed",
	}},
}

// exitCodesHelp is the exit-code table: the whole of it for cmd "", else
// the rows of cmd, in its words.
func exitCodesHelp(cmd string) string {
	var b strings.Builder
	if cmd == "" {
		b.WriteString("Exit codes:\n")
	} else {
		b.WriteString("Exit status:\n")
	}
	for _, r := range exitTable {
		what := r.what
		if cmd != "" {
			w, ok := r.cmds[cmd]
			if !ok {
				continue
			}
			if w != "" {
				what = w
			}
		}
		writeWrapped(&b, fmt.Sprintf("  %-7s", r.code), what)
	}
	return b.String()
}

// exitCodesOf returns the codes cmd's help lists, for the tests.
func exitCodesOf(cmd string) []string {
	var out []string
	for _, r := range exitTable {
		if _, ok := r.cmds[cmd]; ok {
			out = append(out, r.code)
		}
	}
	return out
}

// writeWrapped writes text after head, wrapped at 78 columns, the
// following lines indented to head's width.
func writeWrapped(b *strings.Builder, head, text string) {
	const width = 78
	indent := strings.Repeat(" ", len(head))
	line := head
	fresh := true
	for _, w := range strings.Fields(text) {
		if !fresh && len(line)+1+len(w) > width {
			b.WriteString(line + "\n")
			line, fresh = indent, true
		}
		if fresh {
			line += w
			fresh = false
		} else {
			line += " " + w
		}
	}
	b.WriteString(line + "\n")
}

// clusterFlags are the flags connFlags.register adds: printFlags lists
// them apart, after the command's own.
var clusterFlags = []string{"etcd", "cacert", "cert", "key", "user", "password", "zk", "zk-auth", "zk-chroot", "prefix", "dial-timeout"}

// envFlags take their default from the environment: their default value
// is not printed (it may be a password), the usage names the variable.
var envFlags = []string{"etcd", "cacert", "cert", "key", "user", "password", "zk", "zk-auth", "zk-chroot"}

// printHelp writes a command's help: its text, its flags (spelled --flag,
// as the text spells them; Go's flag package accepts both) and its exit
// codes.
func printHelp(w io.Writer, cmd, text string, fs *flag.FlagSet) {
	io.WriteString(w, text)
	var own, cluster []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if slices.Contains(clusterFlags, f.Name) {
			cluster = append(cluster, f)
		} else {
			own = append(own, f)
		}
	})
	slices.SortFunc(cluster, func(a, b *flag.Flag) int {
		return slices.Index(clusterFlags, a.Name) - slices.Index(clusterFlags, b.Name)
	})
	if len(own) > 0 {
		io.WriteString(w, "\nFlags:\n")
		writeFlags(w, own)
	}
	if len(cluster) > 0 {
		io.WriteString(w, "\nCluster flags (the defaults from the environment are etcdctl's variables, and distlock's own for ZooKeeper):\n")
		writeFlags(w, cluster)
	}
	fmt.Fprintf(w, "\n%s", exitCodesHelp(cmd))
}

// writeFlags writes flags as flag.PrintDefaults does, but spelled --flag.
func writeFlags(w io.Writer, flags []*flag.Flag) {
	var b strings.Builder
	for _, f := range flags {
		name, usage := flag.UnquoteUsage(f)
		head := "  --" + f.Name
		if name != "" {
			head += " " + name
		}
		b.WriteString(head + "\n")
		text := usage
		if def := f.DefValue; !slices.Contains(envFlags, f.Name) && !isZeroDefault(f) && !strings.Contains(usage, "(default") {
			if name == "string" {
				def = fmt.Sprintf("%q", def)
			}
			text += fmt.Sprintf(" (default %s)", def)
		}
		writeWrapped(&b, "        ", text)
	}
	io.WriteString(w, b.String())
}

// isZeroDefault reports whether f's default is its type's zero value.
func isZeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "0s":
		return true
	}
	return false
}
