// Command vigil is the vigil server and its operator tools. `vigil --help` lists the commands;
// every command answers -h/--help with its usage and flags, and docs/cli.md is the reference
// generated from the same command tree.
//
// Exit status: 0 on success, 1 when the command failed (the server refused, a file could not
// be read), 2 when the command line is wrong (unknown command or flag, missing argument, bad
// value). Either failure prints one line, "vigil: ...", on stderr.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/status"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runContext(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs one vigil command line and returns its exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

// runContext runs one vigil command line until ctx ends (commands that follow a stream, such
// as worker watch, stop there) and returns its exit status.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	code := exitFailure
	var uerr usageError
	if errors.As(err, &uerr) || !ran(cmd) {
		// Cobra's own errors (unknown command, unknown flag, a flag's bad value, wrong
		// arguments) come before the command runs.
		code = exitUsage
		fmt.Fprintf(stderr, "vigil: %s (see '%s --help')\n", message(err), cmd.CommandPath())
		return code
	}
	fmt.Fprintf(stderr, "vigil: %s\n", message(err))
	return code
}

// usageError is a wrong command line found by a command itself: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef returns a usageError.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// ranKey marks, in a command's annotations, that its RunE started: an error after that is a
// failure, before it a usage error.
const ranKey = "vigil.ran"

func ran(cmd *cobra.Command) bool {
	return cmd != nil && cmd.Annotations[ranKey] == "true"
}

func markRan(cmd *cobra.Command) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[ranKey] = "true"
}

// message is err on one line; a gRPC status reads "Code: message".
func message(err error) string {
	msg := err.Error()
	if s, ok := status.FromError(unwrapStatus(err)); ok && s.Code() != 0 {
		prefix := ""
		// Keep the context a command added in front of the status ("--tls-ca: ...").
		if full, inner := err.Error(), unwrapStatus(err).Error(); full != inner {
			prefix = strings.TrimSuffix(full, inner)
		}
		msg = prefix + s.Code().String() + ": " + s.Message()
	}
	return strings.ReplaceAll(strings.TrimSpace(msg), "\n", " ")
}

// unwrapStatus returns the innermost error in err's chain that carries a gRPC status, or err.
func unwrapStatus(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if _, ok := e.(interface{ GRPCStatus() *status.Status }); ok {
			return e
		}
	}
	return err
}
