package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vigilhq/vigil/common/buildinfo"
)

// newRootCmd builds the whole command tree, writing to stdout and stderr.
func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "vigil",
		Short: "A Temporal-compatible server that knows which workers are alive",
		Long: `vigil is a Temporal-compatible server that knows which workers are alive: stock Temporal
SDK workers heartbeat to it, it holds a lease per worker, and when a worker is lost its
activities run again on live workers.

"vigil server start" runs the server; the other commands talk to a running one. They find it
as the temporal CLI would: --address and --namespace, else VIGIL_ADDRESS and VIGIL_NAMESPACE,
else the Temporal environment configuration (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
TEMPORAL_API_KEY, the TLS variables and the profiles of temporal.toml).`,
		Version:           buildinfo.Get().Version,
		SilenceErrors:     true,
		SilenceUsage:      true,
		DisableAutoGenTag: true,
		// "vigil" alone prints the help; an unknown command is a usage error (cobra's).
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		if strings.HasPrefix(err.Error(), "unknown shorthand flag") && strings.Contains(err.Error(), " in -") {
			// -address: the standard flag package took one dash for long flags; pflag does not.
			err = fmt.Errorf("%w; long flags take two dashes (--address, not -address)", err)
		}
		return usageError{err}
	})
	root.CompletionOptions.HiddenDefaultCmd = false

	var out outputFlags
	out.register(root)

	root.AddGroup(&cobra.Group{ID: "server", Title: "Server:"}, &cobra.Group{ID: "client", Title: "Talk to a running server:"})
	root.AddCommand(
		withGroup("server", newServerCmd()),
		withGroup("client", newWorkerCmd(&out)),
		withGroup("client", newActivityCmd(&out)),
		withGroup("client", newClusterCmd(&out)),
		withGroup("client", newAPIKeyCmd(&out)),
		withGroup("client", newTaskTokenCmd(&out)),
		newBenchCmd(&out),
		newVersionCmd(&out),
		newDocsCmd(),
	)
	// --version prints what `vigil version` prints.
	root.SetVersionTemplate(versionText(buildinfo.Get()))
	// The completion and help commands, made now so that the reference (docs/cli.md) lists them.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Short = "Print a shell completion script (bash, zsh, fish, powershell)"
			c.Long = `Print the completion script of a shell. Commands, flags and fixed flag values complete
offline; worker instance keys, activity IDs and API key IDs are read from the server the
command line points at (its connection flags typed so far count).`
			c.Example = `  source <(vigil completion bash)
  vigil completion zsh > "${fpath[1]}/_vigil"
  vigil completion fish > ~/.config/fish/completions/vigil.fish`
		}
	}
	return root
}

func withGroup(id string, c *cobra.Command) *cobra.Command {
	c.GroupID = id
	return c
}

// groupRunE is the RunE of a command that only groups others: alone it is a usage error that
// names the subcommands, as is an unknown subcommand.
func groupRunE(cmd *cobra.Command, args []string) error {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() && c.Name() != "help" {
			names = append(names, c.Name())
		}
	}
	if len(args) == 0 {
		return usagef("which one? (%s)", strings.Join(names, ", "))
	}
	return usagef("unknown command %q for %q (want %s)", args[0], cmd.CommandPath(), strings.Join(names, ", "))
}

// newGroup returns a command that groups subcommands.
func newGroup(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, RunE: groupRunE, Args: cobra.ArbitraryArgs}
	c.AddCommand(subs...)
	return c
}

// runner wraps a command's work: it marks the command as run, so that an error it returns is
// a failure (exit 1) unless it is a usageError.
func runner(f func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		markRan(cmd)
		return f(cmd, args)
	}
}

// exactArgs is cobra.ExactArgs with the arguments named in the message.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) == len(names) {
			return nil
		}
		if len(args) < len(names) {
			return usagef("missing %s", strings.Join(names[len(args):], " "))
		}
		return usagef("unexpected argument %q", args[len(names)])
	}
}

// noArgs refuses positional arguments.
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q (flags start with --)", args[0])
	}
	return nil
}

func newVersionCmd(out *outputFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and build date",
		Long: `Print the version, commit and build date of this vigil binary (the same as vigil --version).
With -o json, jsonl or yaml: one object with version, commit, date and goVersion.`,
		Args: noArgs,
		RunE: runner(func(cmd *cobra.Command, _ []string) error {
			p, err := out.printer(cmd)
			if err != nil {
				return err
			}
			info := buildinfo.Get()
			if p.format == formatTable {
				_, err := fmt.Fprint(p.w, versionText(info))
				return err
			}
			return p.object(info, nil)
		}),
	}
}

// versionText is what vigil --version and vigil version print.
func versionText(i buildinfo.Info) string {
	return fmt.Sprintf("vigil %s\ncommit  %s\nbuilt   %s\ngo      %s\n", i.Version, i.Commit, i.Date, i.GoVersion)
}
