// Command distlock runs commands under distributed locks on etcd or
// ZooKeeper, shows a lock's queue, runs a job once per slot across a fleet,
// and demonstrates why locks need fencing tokens.
//
//	distlock demo                                  the seed chapter's story on an embedded etcd
//	distlock run --lock NAME [conn] -- CMD [ARGS]  run CMD while holding NAME
//	distlock status [conn] NAME                    NAME's holder and waiters
//	distlock once --lock NAME --slot SLOT [conn] -- CMD [ARGS]
//	                                               run CMD once per SLOT across all servers
//	distlock revoke --reason TEXT [--grace D] [--force] [conn] NAME
//	                                               ask NAME's holders to let go, then force it
//
// Exit codes (see exitTable in help.go): the command's own code when it
// ran, and distinct codes for a usage error, a semaphore of another
// permit count, a cluster that cannot be reached, a lock not acquired,
// and a lock lost while the command ran.
//
// # The embedded etcd server and the build tag noembedetcd
//
// `distlock demo` runs on an etcd member embedded in the process, so that
// the README's first command, `(cd cmd && go run ./distlock demo)`, needs
// no setup on a fresh machine. That server (go.etcd.io/etcd/server/v3 and its
// dependencies) is about 14 MB of a 35 MB binary that the lock commands
// never use. A production build leaves it out with
//
//	go build -tags noembedetcd ./distlock    (in the cmd module)
//
// (`go list -deps -tags noembedetcd ./distlock | grep etcd/server` is
// then empty): demo_etcd.go is the only file that imports the server, and
// without it `distlock demo` says how to run the demo instead
// (demo_noetcd.go); `distlock demo --backend zk` still works. The default
// build keeps the server because a build tag can only be opted into: the
// alternatives were worse. A separate distlock-demo binary that `distlock
// demo` runs through `go run` needs the Go toolchain and the module's
// source at run time, and `go run` turns every exit code into 1 and puts a
// process between the demo and the Ctrl-C it must honour; an external
// etcd would no longer be "no setup".
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
)

// Exit codes. The ones from sysexits.h where one fits; a command's own
// exit code passes through unchanged, so scripts that must tell them apart
// should avoid these values in their commands. The table users read is
// exitTable (help.go); TestHelpExitCodes keeps the two in step.
const (
	exitOK = 0
	// exitFailure: an error not covered below.
	exitFailure = 1
	// exitUsage: bad flags or arguments (EX_USAGE).
	exitUsage = 64
	// exitDataErr: the arguments are well-formed but disagree with what
	// the store holds: run --permits N on a semaphore whose holders and
	// waiters use another N (EX_DATAERR). Not a usage error, because the
	// line itself is fine and may be right (the others may be the ones
	// to change); not 69, because the cluster answered, and retrying
	// does not help.
	exitDataErr = 65
	// exitUnreachable: the cluster could not be reached, refused the
	// credentials (TLS, etcd user, ZooKeeper digest), is not etcd or
	// ZooKeeper, or answered with an error (EX_UNAVAILABLE).
	exitUnreachable = 69
	// exitNotAcquired: --no-wait found the lock held, or --wait elapsed;
	// revoke: a holder still holds the lock after the grace period, not
	// forced (EX_TEMPFAIL: try again later).
	exitNotAcquired = 75
	// exitLost: the lock was lost while the command ran; the command was
	// stopped.
	exitLost = 76
	// exitCannotRun / exitNotFound: the command could not be started, as
	// in POSIX shells.
	exitCannotRun = 126
	exitNotFound  = 127
)

// exitError carries an exit code and a one-line message.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exit returns an error that makes main exit with code, printing err.
func exit(code int, err error) error { return &exitError{code: code, err: err} }

// usageErr is a usage error with a hint.
func usageErr(format string, args ...any) error {
	return exit(exitUsage, fmt.Errorf(format, args...))
}

// silentExit makes main exit with code without printing anything (the
// command's own exit code).
type silentExit int

func (s silentExit) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
	// hidden commands are internal (the demo's worker process) and not
	// listed by --help.
	hidden bool
}

// commands lists the subcommands; each lives in its own file.
var commands []command

func register(c command) { commands = append(commands, c) }

func usage(w io.Writer) {
	fmt.Fprintf(w, "distlock %s — distributed locks with fencing tokens on etcd and ZooKeeper\n\nUsage:\n  distlock <command> [flags] [args]\n\nCommands:\n", version())
	for _, c := range commands {
		if !c.hidden {
			fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprintf(w, "\nRun 'distlock <command> --help' for a command's flags, environment, examples and the exit codes it uses.\n\n%s", exitCodesHelp(""))
}

// version returns the module version this binary was built from.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command line args and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return exitOK
	case "-version", "--version", "version":
		fmt.Fprintf(stdout, "distlock %s\n", version())
		return exitOK
	}
	for _, c := range commands {
		if c.name == args[0] {
			return code(c.run(args[1:], stdout, stderr), stderr)
		}
	}
	fmt.Fprintf(stderr, "distlock: unknown command %q; run 'distlock --help' for the list\n", args[0])
	return exitUsage
}

// code prints err (one line) and returns the exit code it stands for.
func code(err error, stderr io.Writer) int {
	var s silentExit
	var e *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &s):
		return int(s)
	case errors.As(err, &e):
		fmt.Fprintf(stderr, "distlock: %s\n", message(e.err))
		return e.code
	}
	fmt.Fprintf(stderr, "distlock: %s\n", message(err))
	return exitFailure
}

// message is err's text on one line, for after the command's own
// "distlock: ": the library's errors start with "distlock: " too
// (distlock.LockError), and a wrapped one would stack it.
func message(err error) string {
	s := strings.TrimPrefix(oneLine(err.Error()), "distlock: ")
	return strings.ReplaceAll(s, ": distlock: ", ": ")
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
