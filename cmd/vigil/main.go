// Command vigil is the vigil server and its operator tools. `vigil help` lists the commands;
// every command and subcommand answers -h/--help with its usage and flags.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// command is one leaf command: its words ("worker list"), the arguments it takes, a line of
// help, and what runs it.
type command struct {
	path, args, help string
	run              func(args []string, stdout, stderr io.Writer) int
}

// sub runs a dispatching command (activity, apikey, tasktoken) with its subcommand's name.
func sub(name string, dispatch func([]string, io.Writer, io.Writer) int) func([]string, io.Writer, io.Writer) int {
	return func(args []string, stdout, stderr io.Writer) int {
		return dispatch(append([]string{name}, args...), stdout, stderr)
	}
}

var commands = []command{
	{"server start", "[flags]", "run the server", serverStart},
	{"worker list", "[flags]", "list workers with their liveness (ACTIVE, INACTIVE, CLEANED_UP)", workerList},
	{"worker describe", "KEY [flags]", "show one worker's liveness record", workerDescribe},
	{"worker watch", "[flags]", "print worker changes live (--query Q, --output json)", func(args []string, stdout, stderr io.Writer) int {
		ctx, stop := signalContext()
		defer stop()
		return workerWatch(ctx, args, stdout, stderr)
	}},
	{"activity list", "[--query Q]", "list standalone activities (ActivityId, TaskQueue, ExecutionStatus, ...)", sub("list", activityCmd)},
	{"activity describe", "ID", "show a standalone activity (state, attempt, worker, options)", sub("describe", activityCmd)},
	{"activity cancel", "ID", "request a standalone activity's cancellation", sub("cancel", activityCmd)},
	{"activity terminate", "ID", "terminate a standalone activity at once", sub("terminate", activityCmd)},
	{"cluster describe", "[flags]", "list the cluster's vigil hosts, their addresses and shards", clusterDescribe},
	{"apikey create", "--namespace NS --role ROLE", "mint an API key (admin); prints the key alone", sub("create", apikeyCmd)},
	{"apikey list", "[flags]", "list API keys", sub("list", apikeyCmd)},
	{"apikey revoke", "ID", "revoke an API key at once on every host", sub("revoke", apikeyCmd)},
	{"tasktoken rotate", "[flags]", "sign task tokens with a new cluster key (cluster admin)", sub("rotate", tasktokenCmd)},
	{"bench", "[flags]", "drive a running server like an SDK fleet and measure it", benchCmd},
	{"version", "", "print the version", func(_ []string, stdout, _ io.Writer) int {
		fmt.Fprintf(stdout, "vigil %s\n", version)
		return 0
	}},
}

// dispatchers take the subcommands of a group that the table does not list (yet).
var dispatchers = map[string]func([]string, io.Writer, io.Writer) int{
	"activity": activityCmd, "apikey": apikeyCmd, "tasktoken": tasktokenCmd,
}

func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// wantsHelp reports whether args ask for help: -h, -help or --help before a "--".
func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "-h" || a == "-help" || a == "--help" {
			return true
		}
	}
	return false
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || isHelp(args[0]) {
		usage(stdout, "")
		return 0
	}
	for _, c := range commands {
		words := strings.Fields(c.path)
		if len(args) < len(words) || strings.Join(args[:len(words)], " ") != c.path {
			continue
		}
		rest := args[len(words):]
		if wantsHelp(rest) || (len(rest) == 1 && rest[0] == "help") {
			return leafHelp(c, stdout)
		}
		return c.run(rest, stdout, stderr)
	}
	group := args[0]
	if !isGroup(group) {
		fmt.Fprintf(stderr, "vigil: unknown command %q\n\n", strings.Join(args, " "))
		usage(stderr, "")
		return 2
	}
	if len(args) > 1 && isHelp(args[1]) {
		usage(stdout, group)
		return 0
	}
	if d, ok := dispatchers[group]; ok && len(args) > 1 && !strings.HasPrefix(args[1], "-") {
		if wantsHelp(args[2:]) {
			d([]string{args[1], "-h"}, stdout, stdout)
			return 0
		}
		return d(args[1:], stdout, stderr)
	}
	if len(args) == 1 {
		fmt.Fprintf(stderr, "vigil %s: which one?\n\n", group)
	} else {
		fmt.Fprintf(stderr, "vigil: unknown command %q\n\n", strings.Join(args, " "))
	}
	usage(stderr, group)
	return 2
}

// leafHelp prints a command's usage and flags: the command's own flag set prints them when
// given -h (to the writer it is handed, here stdout).
func leafHelp(c command, stdout io.Writer) int {
	fmt.Fprintf(stdout, "vigil %s %s\n  %s\n\n", c.path, c.args, c.help)
	c.run([]string{"-h"}, stdout, stdout)
	return 0
}

func isGroup(word string) bool {
	for _, c := range commands {
		if strings.HasPrefix(c.path+" ", word+" ") {
			return true
		}
	}
	_, ok := dispatchers[word]
	return ok
}

// usage lists the commands, or only those of group.
func usage(w io.Writer, group string) {
	if group == "" {
		fmt.Fprint(w, "vigil: a Temporal-compatible server that knows which workers are alive.\n\n")
	}
	fmt.Fprint(w, "Usage:\n")
	for _, c := range commands {
		if group != "" && !strings.HasPrefix(c.path+" ", group+" ") {
			continue
		}
		fmt.Fprintf(w, "  %-46s %s\n", strings.TrimSpace("vigil "+c.path+" "+c.args), c.help)
	}
	fmt.Fprint(w, "\nEvery command takes -h/--help for its flags.\n")
}
