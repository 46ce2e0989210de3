package main

import (
	"bytes"
	"flag"
	"fmt"
	"reflect"
	"sort"

	"k8s.io/klog/v2"

	"github.com/app-controller/app-controller/pkg/controllermanager"
)

// valueTypes names the types of flags whose value is of a type the flag package does not
// know (flag.UnquoteUsage calls them "value"), by the Go type of the value.
var valueTypes = map[string]string{
	"controllermanager.stringSliceValue": "strings",
	"controllermanager.stringList":       "strings",
	"klog.Level":                         "int",
	"klog.moduleSpec":                    "pattern=N,...",
	"klog.traceLocation":                 "file:N",
	"klog.severityValue":                 "severity",
}

// renderFlags writes flags.md: the controller's own flags, then klog's.
func renderFlags(w *bytes.Buffer) error {
	fs := controllermanager.NewCommandLine("app-controller", flag.ContinueOnError).FlagSet
	logging := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(logging)

	var own, klogs []*flag.Flag
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if logging.Lookup(f.Name) != nil {
			klogs = append(klogs, f)
		} else {
			own = append(own, f)
		}
	})
	w.WriteString("# app-controller flags\n\n")
	w.WriteString(generated("the flag set of cmd/app-controller (controllermanager.NewCommandLine)"))
	w.WriteString(`
` + "`app-controller --help`" + ` prints the same. Flags take one dash or two (` + "`-v=2`" + `, ` + "`--workers=20`" + `).
The Helm chart sets them from its values ([helm-values.md](helm-values.md)); ` + "`make run ARGS=...`" + `
adds some to the local controller.

`)
	w.WriteString("| flag | type | default | |\n|---|---|---|---|\n")
	for _, f := range own {
		if err = writeFlag(w, f); err != nil {
			return err
		}
	}
	w.WriteString("\n## Logging (klog)\n\nklog's own flags; `-v` is the verbosity (2 logs every write and status change, 4 every event).\n\n")
	w.WriteString("| flag | type | default | |\n|---|---|---|---|\n")
	sort.Slice(klogs, func(i, j int) bool { return klogs[i].Name < klogs[j].Name })
	for _, f := range klogs {
		if err = writeFlag(w, f); err != nil {
			return err
		}
	}
	return nil
}

// shownDefault is the default a flag table shows for a flag of type typ: none for a
// bool flag that is false or a list that is empty (what leaving the flag out means).
func shownDefault(typ, def string) string {
	if (typ == "bool" && def == "false") || def == "[]" {
		return ""
	}
	return def
}

func writeFlag(w *bytes.Buffer, f *flag.Flag) error {
	typ, usage := flag.UnquoteUsage(f)
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		typ = "bool"
	}
	if typ == "value" {
		t := reflect.TypeOf(f.Value)
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		name, ok := valueTypes[t.String()]
		if !ok {
			return fmt.Errorf("flag --%s: no type name for its value's type %s: add one to valueTypes", f.Name, t)
		}
		typ = name
	}
	fmt.Fprintf(w, "| `--%s` | %s | %s | %s |\n", f.Name, typ, code(shownDefault(typ, f.DefValue)), cell(usage))
	return nil
}
