package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/app-controller/app-controller/internal/plugin"
)

// renderPlugin writes kubectl-app.md: each command's synopsis, description, examples
// and flags, then the flags every command takes.
func renderPlugin(w *bytes.Buffer) error {
	root := plugin.Command()
	var commands []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if !sub.IsAvailableCommand() {
				continue
			}
			commands = append(commands, sub)
			// Cobra's completion command: its subcommands (one per shell) and their
			// help are cobra's, summed up in the command's own section.
			if sub.Name() != completionCommand {
				walk(sub)
			}
		}
	}
	walk(root)

	w.WriteString("# kubectl app\n\n")
	w.WriteString(generated("the commands of internal/plugin"))
	fmt.Fprintf(w, "\n%s\n\n", root.Short)
	w.WriteString("Install: `make plugin` builds `bin/kubectl-app` (put `bin/` on `PATH`), or `kubectl krew install` the manifest\n")
	w.WriteString("of a release. kubectl then runs it as `kubectl app`.\n\n")
	fmt.Fprintf(w, "```\n%s\n```\n\n", strings.TrimSpace(root.Long))
	w.WriteString("| command | |\n|---|---|\n")
	for _, c := range commands {
		fmt.Fprintf(w, "| [`%s`](#%s) | %s |\n", displayPath(c), anchor(displayPath(c)), cell(c.Short))
	}
	for _, c := range commands {
		fmt.Fprintf(w, "\n## %s\n\n%s.\n\n", displayPath(c), strings.TrimSuffix(c.Short, "."))
		fmt.Fprintf(w, "```\n%s\n```\n", useLine(c))
		switch {
		case c.Name() == completionCommand:
			var shells []string
			for _, sub := range c.Commands() {
				shells = append(shells, "`"+sub.Name()+"`")
			}
			fmt.Fprintf(w, "\nPrints a completion script of `kubectl-app` for the shell: %s; `kubectl app completion SHELL --help`\nsays how to load it. kubectl itself completes `kubectl app` through `kubectl_complete-app`\n(next to `kubectl-app` on `PATH`).\n", strings.Join(shells, ", "))
		case c.Long != "":
			fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.Long))
		}
		if c.Example != "" {
			fmt.Fprintf(w, "\nExamples:\n\n```sh\n%s\n```\n", trimIndent(c.Example))
		}
		if c.HasAvailableLocalFlags() {
			w.WriteString("\n")
			writeFlagTable(w, c.LocalFlags())
		}
	}
	w.WriteString("\n## Flags of every command\n\nkubectl's connection flags, and the plugin's log verbosity.\n\n")
	writeFlagTable(w, root.PersistentFlags())
	return nil
}

// completionCommand is the name of the completion command cobra adds.
const completionCommand = "completion"

// displayPath is the command as users type it: "kubectl app create".
func displayPath(c *cobra.Command) string {
	path := []string{c.Name()}
	for p := c.Parent(); p != nil; p = p.Parent() {
		path = append([]string{p.DisplayName()}, path...)
	}
	return strings.Join(path, " ")
}

// useLine is the command's usage line with the display path.
func useLine(c *cobra.Command) string {
	use := c.Use
	if i := strings.IndexByte(use, ' '); i >= 0 {
		return displayPath(c) + use[i:]
	}
	return displayPath(c)
}

// anchor is GitHub's anchor of a heading.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// trimIndent removes the indentation cobra examples carry.
func trimIndent(text string) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "  ")
	}
	return strings.Join(lines, "\n")
}

// writeFlagTable writes the non-hidden flags of fs as a table.
func writeFlagTable(w *bytes.Buffer, fs *pflag.FlagSet) {
	w.WriteString("| flag | type | default | |\n|---|---|---|---|\n")
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		name := "--" + f.Name
		if f.Shorthand != "" {
			name = "-" + f.Shorthand + ", " + name
		}
		usage := f.Usage
		if f.Deprecated != "" {
			usage += " Deprecated: " + f.Deprecated
		}
		fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", name, f.Value.Type(), code(shownDefault(f.Value.Type(), f.DefValue)), cell(usage))
	})
}
