// Command tern is Tern's server and CLI. tern serve serves the logs of a
// data directory over gRPC; the other commands work on a data directory, or
// on a server with --server: they create, list, describe, truncate and
// delete logs, append stdin lines as entries, read entries back as text or
// JSON lines, and manage and consume subscriptions.
//
// Exit codes: 0 on success, 1 on an error, 2 on a usage error.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal kills at once
	}()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command line args and returns the exit code. Cancelling ctx
// interrupts the command; read --follow and sub consume --follow then exit
// 0, and serve shuts down gracefully and exits 0.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv}
	return a.run(ctx, args)
}

// app is what the commands share: the standard streams and how to reach the
// data directory.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string

	// dir is the --data flag (--dir is its old name).
	dir string
	// server is the address of the server the commands work on, from
	// --server or $TERN_SERVER; empty for the data directory.
	server string
	// storage is the URL of the object store of the data directory's
	// object logs, from --storage or $TERN_STORAGE; unused with server.
	storage string
	// remote is how to reach a secured server: TLS and a token.
	remote remoteFlags
	// open opens the data directory; nil means tern.Open. Tests replace it to
	// share one Client between commands, since only one Client may have a
	// directory open at a time.
	open func(ctx context.Context, dir string) (*tern.Client, error)
	// shutdownTimeout bounds serve's shutdown; zero means its default.
	shutdownTimeout time.Duration
	// atExit runs when the command has returned, newest first: it stops
	// what opening the data directory started (its embedded etcd).
	atExit []func()
}

func (a *app) run(ctx context.Context, args []string) int {
	defer func() {
		for i := len(a.atExit) - 1; i >= 0; i-- {
			a.atExit[i]()
		}
	}()
	root := a.rootCmd()
	if args == nil {
		args = []string{} // cobra reads os.Args when args is nil
	}
	root.SetArgs(args)
	_, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	if ue, ok := errors.AsType[*usageError](err); ok {
		// One line that says what is wrong, and where the usage is: not the
		// usage itself, under which the line would scroll away.
		fmt.Fprintf(a.stderr, "tern: %v\nSee \"%s --help\".\n", ue.err, ue.cmd.CommandPath())
		return 2
	}
	if ce, ok := errors.AsType[*configError](err); ok {
		fmt.Fprintf(a.stderr, "tern: %v\n", ce.err)
		return 2
	}
	if m := authMessage(err); m != "" {
		fmt.Fprintf(a.stderr, "tern: %s\n", m)
		return 1
	}
	fmt.Fprintf(a.stderr, "tern: %s\n", message(a.serverErr(err)))
	return 1
}

// message is the text of err for a person, without the "tern: " prefix that
// most of the library's errors start with.
func message(err error) string {
	if errors.Is(err, context.Canceled) {
		return "interrupted"
	}
	return strings.TrimPrefix(err.Error(), "tern: ")
}

func (a *app) rootCmd() *cobra.Command {
	dir := a.dataDefault()
	root := &cobra.Command{
		Use:   "tern",
		Short: "Manage, append to and read the write-ahead logs of a data directory, or a server with --server",
		Long: `Manage, append to and read the write-ahead logs of a data directory, or a
server with --server; serve a data directory with "tern serve".

Only one process may use a data directory at a time: while "tern serve" has
it, reach its logs with --server.

The object logs of a data directory need its object store: --storage URL, as
given to tern serve. The S3 credentials come from $TERN_STORAGE_ACCESS_KEY
and $TERN_STORAGE_SECRET_KEY, or else $AWS_ACCESS_KEY_ID,
$AWS_SECRET_ACCESS_KEY and $AWS_SESSION_TOKEN; an SSE-C key from the file
named by $TERN_STORAGE_SSEC_KEY_FILE.

A server started with TLS or --auth is reached with --tls-ca FILE (or an
https:// address, for the system's CAs), the token in $TERN_TOKEN (or
--token, which other users see in ps), and, for mutual TLS, --tls-cert FILE
--tls-key FILE. They apply to every command that works on a server.`,
		Args: noSubcommand,
		RunE: help,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			if f.Changed("dir") {
				fmt.Fprintln(a.stderr, "tern: --dir is the old name of --data, the name tern serve and $TERN_DATA use: use --data")
			}
			switch {
			case f.Changed("server") && (f.Changed("data") || f.Changed("dir")):
				return usagef(cmd, "--server and --data cannot be used together: the server has its own data directory; leave one out")
			case f.Changed("server") && cmd.Root().PersistentFlags().Changed("storage"): // not serve's own --storage
				return usagef(cmd, "--server and --storage cannot be used together: the server has its own object store (tern serve --storage); leave one out")
			case f.Changed("data") || f.Changed("dir"):
				a.server = "" // an explicit --data beats $TERN_SERVER
			}
			if cmd.Parent() == cmd.Root() && cmd.Name() == "serve" {
				return a.remote.refuseOnServe(cmd)
			}
			return a.remote.resolve(cmd, a)
		},
		SilenceErrors: true, // run prints errors once, its own way
		SilenceUsage:  true, // and usage only for usage errors
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &usageError{cmd: cmd, err: flagError(cmd, err)}
	})
	root.PersistentFlags().StringVar(&a.dir, "data", dir, "the data `directory`, as for tern serve --data; $TERN_DATA sets the default")
	root.PersistentFlags().StringVar(&a.dir, "dir", dir, "the data `directory`: the old name of --data")
	root.PersistentFlags().MarkHidden("dir")
	root.PersistentFlags().StringVar(&a.storage, "storage", a.getenv("TERN_STORAGE"), "the `URL` of the object store of the data directory's object logs, as for tern serve --storage; $TERN_STORAGE sets the default")
	root.PersistentFlags().StringVar(&a.server, "server", a.getenv("TERN_SERVER"), "work on the logs of the tern serve at this `address` (host:port, port 7070 when left out; https://host:port for TLS; several nodes of a cluster as host:port,host:port) instead of a data directory; $TERN_SERVER sets the default")
	a.remote.register(root.PersistentFlags())
	root.AddCommand(a.serveCmd(), a.logCmd(), a.appendCmd(), a.readCmd(), a.subCmd(), a.benchCmd(), a.doctorCmd(), a.checkCmd(), a.authCmd(), versionCmd())
	return root
}

// dataDefault is the default of --data: $TERN_DATA, else $TERN_DIR (its old
// name, with a warning), else ./tern-data.
func (a *app) dataDefault() string {
	data, old := a.getenv("TERN_DATA"), a.getenv("TERN_DIR")
	switch {
	case old != "" && data == "":
		fmt.Fprintf(a.stderr, "tern: $TERN_DIR is the old name of $TERN_DATA, which tern serve reads too: set TERN_DATA=%s instead\n", old)
		return old
	case old != "" && old != data:
		fmt.Fprintf(a.stderr, "tern: $TERN_DIR=%s is ignored: $TERN_DATA=%s is set, and is the name to use\n", old, data)
	}
	return cmp.Or(data, "./tern-data")
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of tern",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "tern %s\n", version())
			return err
		},
	}
}

// version is this binary's module version, "devel" when built from a work
// tree.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// usageError is a command line that does not fit the command: exit code 2,
// and a pointer to the command's --help.
type usageError struct {
	cmd *cobra.Command
	err error
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(cmd *cobra.Command, format string, args ...any) error {
	return &usageError{cmd: cmd, err: fmt.Errorf(format, args...)}
}

// exactArgs accepts exactly the named positional arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == len(names):
			return nil
		case len(names) == 0:
			return usagef(cmd, "%s takes no arguments, got %q", cmd.CommandPath(), args)
		}
		return usagef(cmd, "%s needs %s, got %d argument(s)", cmd.CommandPath(), strings.Join(names, " "), len(args))
	}
}

// noSubcommand is the Args of a command that only groups subcommands.
func noSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	hint := ""
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, which SuggestionsFor does not apply
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		hint = fmt.Sprintf(" (did you mean %q?)", s[0])
	}
	return usagef(cmd, "unknown command %q for %q%s", args[0], cmd.CommandPath(), hint)
}

func help(cmd *cobra.Command, _ []string) error { return cmd.Help() }

// openClient opens the data directory, or connects to the server. Only log
// create may create the directory: the other commands would only find it
// empty, and a mistyped --data is likelier.
func (a *app) openClient(ctx context.Context, create bool) (*tern.Client, error) {
	if a.open != nil {
		return a.open(ctx, a.dir)
	}
	if a.server != "" {
		opts, err := a.serverOptions()
		if err != nil {
			return nil, err
		}
		c, err := tern.Open(ctx, opts)
		if err != nil && ctx.Err() == nil && grpcStatus(err) == nil && !errors.Is(err, tern.ErrTLS) && !errors.Is(err, tern.ErrUnauthenticated) && !errors.Is(err, tern.ErrInvalid) {
			// Not reached in time, or not a Tern server; serverErr
			// explains a refused connection.
			err = fmt.Errorf("%w: check --server (or $TERN_SERVER)", err)
		}
		return c, err
	}
	if !create {
		if _, err := os.Stat(a.dir); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("data directory %s does not exist: create a log in it with \"tern log create NAME\", or point --data (or $TERN_DATA) at an existing one", a.dir)
		}
	}
	storage, err := a.storageOptions()
	if err != nil {
		return nil, err
	}
	return a.openDir(ctx, tern.Options{Dir: a.dir, Logger: a.quietLogger(), Storage: storage})
}

// serverOptions are the options of a client of the server, a.server,
// with the TLS and the token of a.remote. It warns on stderr when the token
// would cross the network in the clear.
func (a *app) serverOptions() (tern.Options, error) {
	opts, err := a.remote.options(a.server)
	if err != nil {
		return tern.Options{}, err
	}
	if w := plaintextTokenWarning(opts); w != "" {
		fmt.Fprint(a.stderr, w)
	}
	return opts, nil
}

// storageOptions is the object store of a data directory opened here: the
// URL of --storage, and the credentials and key from the environment that
// tern serve reads too.
func (a *app) storageOptions() (tern.StorageOptions, error) {
	if a.storage == "" {
		return tern.StorageOptions{}, nil
	}
	key, err := readSSECKey(a.getenv("TERN_STORAGE_SSEC_KEY_FILE"), "$TERN_STORAGE_SSEC_KEY_FILE")
	if err != nil {
		return tern.StorageOptions{}, err
	}
	return tern.StorageOptions{
		URL:       a.storage,
		AccessKey: a.getenv("TERN_STORAGE_ACCESS_KEY"),
		SecretKey: a.getenv("TERN_STORAGE_SECRET_KEY"),
		SSECKey:   key,
	}, nil
}

// where names what the commands work on, for messages: "in DIR" or "on
// server ADDR".
func (a *app) where() string {
	if a.server != "" {
		return "on server " + a.serverShown()
	}
	return "in " + a.dir
}

// serverShown is --server as dialed, for messages: each node's host:port,
// with the port that was left out (127.0.0.1 is 127.0.0.1:7070).
func (a *app) serverShown() string {
	nodes := strings.Split(a.server, ",")
	for i, n := range nodes {
		addr, https, err := serverAddr(n)
		if err != nil {
			return a.server
		}
		if https {
			addr = "https://" + addr
		}
		nodes[i] = addr
	}
	return strings.Join(nodes, ",")
}

// serverErr explains an error that says the server cannot be reached
// (gRPC's UNAVAILABLE without a Tern reason); it returns other errors as
// they are.
func (a *app) serverErr(err error) error {
	st := grpcStatus(err)
	if a.server == "" || st == nil || st.Code() != codes.Unavailable {
		return err
	}
	return fmt.Errorf("cannot reach the tern server at %s (%s): is \"tern serve\" running there? check --server (or $TERN_SERVER)", a.serverShown(), st.Message())
}

// grpcStatus is the gRPC status err wraps, or nil: the status itself, not
// status.FromError's, whose message is all of err's text.
func grpcStatus(err error) *status.Status {
	se, ok := errors.AsType[interface {
		error
		GRPCStatus() *status.Status
	}](err)
	if !ok {
		return nil
	}
	return se.GRPCStatus()
}

// closeClient closes c unless it was lent by a.open, adding the error to *err.
func (a *app) closeClient(c *tern.Client, err *error) {
	if a.open == nil {
		*err = errors.Join(*err, c.Close())
	}
}

// openLog opens the data directory and the named log in it, telling a person
// how to create the log if it is missing. The caller defers done(&err), which
// closes the directory and adds its error to err.
func (a *app) openLog(ctx context.Context, name string) (l *tern.Log, done func(err *error), err error) {
	c, err := a.openClient(ctx, false)
	if err != nil {
		return nil, nil, err
	}
	done = func(err *error) { a.closeClient(c, err) }
	l, err = c.OpenLog(ctx, name)
	if errors.Is(err, tern.ErrNotFound) {
		err = fmt.Errorf("%w %s: create it with \"tern log create %s\", or see the logs there with \"tern log list\"", err, a.where(), name)
	}
	if err != nil {
		done(&err)
		return nil, nil, err
	}
	return l, done, nil
}
