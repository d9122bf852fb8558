package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The generated reference sits between these markers of docs/cli.md; the prose around it is
// written by hand.
const (
	docBegin = "<!-- BEGIN GENERATED: vigil command reference (make cli-doc) -->"
	docEnd   = "<!-- END GENERATED: vigil command reference -->"
)

// newDocsCmd is the hidden command `make cli-doc` runs: it writes the command reference into
// docs/cli.md, from the command tree itself.
func newDocsCmd() *cobra.Command {
	var check bool
	cmd := &cobra.Command{
		Use:    "docs FILE",
		Short:  "Write the command reference into FILE (docs/cli.md) between its markers",
		Hidden: true,
		Args:   exactArgs("FILE"),
		RunE: runner(func(cmd *cobra.Command, args []string) error {
			changed, err := updateCLIDoc(args[0], !check)
			if err != nil {
				return err
			}
			if changed && check {
				return fmt.Errorf("%s is out of date: run make cli-doc", args[0])
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&check, "check", false, "change nothing; fail if FILE is out of date")
	return cmd
}

// updateCLIDoc renders the reference into path's block; it reports whether the block was out
// of date, and writes the new content when write is set.
func updateCLIDoc(path string, write bool) (bool, error) {
	old, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	b, rest, ok := strings.Cut(string(old), docBegin)
	_, after, ok2 := strings.Cut(rest, docEnd)
	if !ok || !ok2 {
		return false, fmt.Errorf("%s: no %q ... %q block", path, docBegin, docEnd)
	}
	var ref bytes.Buffer
	writeReference(&ref, newRootCmd(io.Discard, io.Discard))
	updated := b + docBegin + "\n" + ref.String() + docEnd + after
	if updated == string(old) {
		return false, nil
	}
	if write {
		return true, os.WriteFile(path, []byte(updated), 0o644)
	}
	return true, nil
}

// writeReference writes every visible command of the tree: its usage, description, examples
// and flags. The root's persistent flags (global) and the client groups' connection flags,
// the same on every group, are listed once.
func writeReference(w io.Writer, root *cobra.Command) {
	fmt.Fprint(w, "\n## Commands\n\n")
	walk(root, func(c *cobra.Command) {
		if c == root {
			return
		}
		indent := strings.Repeat("  ", len(strings.Fields(c.CommandPath()))-2)
		if hasSection(c) {
			fmt.Fprintf(w, "%s- [`%s`](#%s): %s\n", indent, c.CommandPath(), anchor(c.CommandPath()), c.Short)
		} else {
			fmt.Fprintf(w, "%s- `%s`: %s\n", indent, c.CommandPath(), c.Short)
		}
	})

	fmt.Fprint(w, "\n## Global flags\n\nEvery command takes these.\n\n")
	writeFlags(w, root.PersistentFlags())

	var client *cobra.Command
	for _, c := range root.Commands() {
		if c.Name() == "worker" {
			client = c
		}
	}
	fmt.Fprint(w, "\n## Connection flags\n\nEvery command of `worker`, `activity`, `cluster`, `apikey` and `tasktoken` takes these, before or after its arguments.\n\n")
	writeFlags(w, client.PersistentFlags())

	walk(root, func(c *cobra.Command) {
		if c == root || !hasSection(c) {
			return
		}
		fmt.Fprintf(w, "\n## %s\n\n", c.CommandPath())
		desc := c.Long
		if desc == "" {
			desc = c.Short + "."
		}
		fmt.Fprintf(w, "%s\n\n```\n%s\n```\n", desc, usageLine(c))
		if c.Example != "" {
			fmt.Fprintf(w, "\nExamples:\n\n```\n%s\n```\n", c.Example)
		}
		if c.HasAvailableLocalFlags() {
			fmt.Fprint(w, "\nFlags:\n\n")
			writeFlags(w, c.LocalNonPersistentFlags())
		}
		if c.Parent() != nil && c.Parent().PersistentFlags().Lookup("address") != nil {
			fmt.Fprint(w, "\nAnd the [connection flags](#connection-flags).\n")
		}
	})
}

// hasSection reports whether c has its own section: every command that runs something, not
// those that only group others.
func hasSection(c *cobra.Command) bool {
	return !c.HasAvailableSubCommands() || c.Name() == "completion"
}

// walk visits c and its visible subcommands, depth first, in the order help lists them.
func walk(c *cobra.Command, visit func(*cobra.Command)) {
	visit(c)
	if c.Name() == "completion" {
		return // its subcommands, one per shell, are its usage line
	}
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			walk(sub, visit)
		}
	}
}

func usageLine(c *cobra.Command) string {
	line := c.UseLine()
	if c.Name() == "completion" {
		line = c.CommandPath() + " bash|zsh|fish|powershell"
	}
	return line
}

// anchor is the GitHub anchor of a "## heading".
func anchor(heading string) string {
	return strings.ReplaceAll(strings.ToLower(heading), " ", "-")
}

// writeFlags writes a flag set as a table, hidden flags left out.
func writeFlags(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprint(w, "| Flag | Default | Meaning |\n|---|---|---|\n")
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		name := "--" + f.Name
		if f.Shorthand != "" {
			name = "-" + f.Shorthand + ", " + name
		}
		varname, usage := pflag.UnquoteUsage(f)
		if varname != "" {
			name += " " + varname
		}
		def := f.DefValue
		switch def {
		case "", "false", "[]", "0", "0s":
			def = ""
		default:
			def = "`" + def + "`"
		}
		fmt.Fprintf(w, "| `%s` | %s | %s |\n", name, def, strings.ReplaceAll(usage, "|", `\|`))
	})
}
