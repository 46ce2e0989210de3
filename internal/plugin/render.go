package plugin

import (
	"fmt"
	"io"

	"k8s.io/cli-runtime/pkg/printers"
)

// Tree drawing, as `kubectl tree` draws it.
const (
	branch     = "├─"
	lastBranch = "└─"
	pipe       = "│ "
	space      = "  "
)

// PrintTree writes t as a table: NAME (kind/name, indented by ownership), HEALTH and
// MESSAGE.
func PrintTree(w io.Writer, t *Tree) error {
	tw := printers.GetNewTabWriter(w)
	fmt.Fprintln(tw, "NAME\tHEALTH\tMESSAGE")
	printNode(tw, t.Root, "", "")
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the tree: %w", err)
	}
	return nil
}

// printNode writes n's line, prefixed by prefix, then its children's lines, prefixed by
// childPrefix and their branch.
func printNode(w io.Writer, n *Node, prefix, childPrefix string) {
	fmt.Fprintf(w, "%s%s/%s\t%s\t%s\n", prefix, n.Kind, n.Name, n.Health, oneLine(n.Message))
	for i, c := range n.Children {
		if i == len(n.Children)-1 {
			printNode(w, c, childPrefix+lastBranch, childPrefix+space)
		} else {
			printNode(w, c, childPrefix+branch, childPrefix+pipe)
		}
	}
}
