package plugin

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// outputWide is the -o format of list that adds columns to its table.
const outputWide = "wide"

// The -o formats of version.
const (
	outputJSON = "json"
	outputYAML = "yaml"
)

// noValue is what a table shows for a value an object does not have, as kubectl's do.
const noValue = "<none>"

// outputFlags are the -o flags of list, status and tree: the plugin's own table by
// default (and -o wide where the command offers it), else one of cli-runtime's printers
// (json, yaml, kyaml, name, go-template, go-template-file, template, templatefile,
// jsonpath, jsonpath-as-json, jsonpath-file).
type outputFlags struct {
	print *genericclioptions.PrintFlags
	// wide tells whether the command accepts -o wide.
	wide bool
}

// newOutputFlags returns the -o flags of a command; wide says whether it accepts -o wide.
func newOutputFlags(wide bool) *outputFlags {
	return &outputFlags{print: genericclioptions.NewPrintFlags(""), wide: wide}
}

// addFlags adds -o, --template, --show-managed-fields and --allow-missing-template-keys
// to cmd.
func (o *outputFlags) addFlags(cmd *cobra.Command) {
	o.print.AddFlags(cmd)
	formats := o.allowedFormats()
	cmd.Flags().Lookup("output").Usage = fmt.Sprintf("Output format. One of: (%s). Default: a table.", strings.Join(formats, ", "))
	if err := cmd.RegisterFlagCompletionFunc("output", func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return withPrefix(formats, toComplete), cobra.ShellCompDirectiveNoFileComp
	}); err != nil {
		panic(fmt.Sprintf("registering the completion of -o: %v", err))
	}
}

// allowedFormats are the values -o accepts.
func (o *outputFlags) allowedFormats() []string {
	formats := o.print.AllowedFormats()
	if o.wide {
		formats = append([]string{outputWide}, formats...)
	}
	return formats
}

// format is the value of -o.
func (o *outputFlags) format() string {
	return strings.ToLower(*o.print.OutputFormat)
}

// table tells whether the command prints its own table: no -o (and no --template), or
// -o wide.
func (o *outputFlags) table() bool {
	switch o.format() {
	case "":
		t := o.print.TemplatePrinterFlags.TemplateArgument
		return t == nil || *t == ""
	case outputWide:
		return o.wide
	}
	return false
}

// isWide tells whether -o wide was asked for.
func (o *outputFlags) isWide() bool { return o.wide && o.format() == outputWide }

// printer returns the printer of -o, nil when the command prints its own table, or an
// error naming the allowed formats when -o has none.
func (o *outputFlags) printer() (printers.ResourcePrinter, error) {
	if o.table() {
		return nil, nil
	}
	p, err := o.print.ToPrinter()
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		return nil, fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: %s",
			*o.print.OutputFormat, strings.Join(o.allowedFormats(), ","))
	}
	if err != nil {
		return nil, fmt.Errorf("making the printer of -o %s: %w", *o.print.OutputFormat, err)
	}
	return p, nil
}

// appObject returns app as an unstructured object with its apiVersion and kind set: the
// printers need them, and objects decoded or returned by a typed client have none.
func appObject(app *appv1.App) (*unstructured.Unstructured, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(app)
	if err != nil {
		return nil, fmt.Errorf("converting App %s/%s: %w", app.Namespace, app.Name, err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(appGroupVersion.WithKind("App"))
	return u, nil
}

// listObject returns a List (v1), as `kubectl get` prints several objects.
func listObject(items []unstructured.Unstructured) *unstructured.UnstructuredList {
	return &unstructured.UnstructuredList{
		Object: map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{"resourceVersion": ""}},
		Items:  items,
	}
}

// printApps prints apps as a List with printer p.
func printApps(w io.Writer, p printers.ResourcePrinter, apps []appv1.App) error {
	items := make([]unstructured.Unstructured, 0, len(apps))
	for i := range apps {
		u, err := appObject(&apps[i])
		if err != nil {
			return err
		}
		items = append(items, *u)
	}
	if err := p.PrintObj(listObject(items), w); err != nil {
		return fmt.Errorf("printing the Apps: %w", err)
	}
	return nil
}

// treeObjects returns the objects of t, the App first, then depth first in the order
// the tree shows them. Placeholders (a child the App asks for but does not control) and
// objects that could not be read are left out: there is no object of the tree to print.
func treeObjects(t *Tree) []unstructured.Unstructured {
	var out []unstructured.Unstructured
	var walk func(n *Node)
	walk = func(n *Node) {
		if n.object != nil {
			out = append(out, *n.object)
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(t.Root)
	return out
}
