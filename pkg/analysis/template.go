package analysis

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// A check's template (templateRef): an AnalysisTemplate of the App's namespace or a
// ClusterAnalysisTemplate holds the query and its conditions; the check gives the values
// of the template's arguments. Resolve turns such a check into a query check of its own
// at each sync (a template's change applies from the next measurement on; the counts
// stay), or says why it cannot: the template does not exist, or the arguments do not fit
// it. The API checks each object alone and cannot know either.

// Templates finds the templates checks refer to: the spec of the template of kind and
// name (namespace: the App's, for an AnalysisTemplate), nil when there is none. A nil
// Templates: the cluster serves neither kind.
type Templates interface {
	Template(kind appv1.AnalysisTemplateKind, namespace, name string) (*appv1.AnalysisTemplateSpec, error)
}

// TemplateError says why check's template cannot be used: Reason is
// appv1.ReasonAnalysisTemplateNotFound or appv1.ReasonAnalysisTemplateInvalid.
type TemplateError struct {
	Reason, Message string
}

func (e *TemplateError) Error() string { return e.Message }

// Resolve returns check c, which refers to a template, as a query check: the template's
// query and conditions, c.TemplateRef.Args holding every argument (the template's
// defaults included), sorted by name. t and the check's interval fill the query in once,
// so that a query that cannot be filled in is said here, not at each measurement. A
// check without templateRef is returned as it is.
func Resolve(c *appv1.AnalysisCheck, t Target, templates Templates) (*appv1.AnalysisCheck, *TemplateError) {
	ref := c.TemplateRef
	if ref == nil {
		return c, nil
	}
	kind := ref.Kind
	if kind == "" {
		kind = appv1.AnalysisTemplateKindNamespaced
	}
	where := ""
	if kind == appv1.AnalysisTemplateKindNamespaced {
		where = " in namespace " + t.Namespace
	}
	if templates == nil {
		return nil, &TemplateError{Reason: appv1.ReasonAnalysisTemplateNotFound, Message: fmt.Sprintf(
			"check %s: %s %s: the controller found no %s CRD at its start (install the release's crds.yaml, then restart it)", c.Name, kind, ref.Name, kind)}
	}
	spec, err := templates.Template(kind, t.Namespace, ref.Name)
	if err != nil {
		return nil, &TemplateError{Reason: appv1.ReasonAnalysisTemplateNotFound,
			Message: fmt.Sprintf("check %s: reading %s %s%s: %v", c.Name, kind, ref.Name, where, err)}
	}
	if spec == nil {
		return nil, &TemplateError{Reason: appv1.ReasonAnalysisTemplateNotFound, Message: fmt.Sprintf(
			"check %s: %s %s not found%s: the check waits for it until progressDeadlineSeconds",
			c.Name, kind, ref.Name, where)}
	}
	args, msg := templateArgs(spec, ref)
	if msg != "" {
		return nil, &TemplateError{Reason: appv1.ReasonAnalysisTemplateInvalid, Message: fmt.Sprintf("check %s: %s %s: %s", c.Name, kind, ref.Name, msg)}
	}
	out := c.DeepCopy()
	out.Query = spec.Query.DeepCopy()
	out.TemplateRef.Kind = kind
	out.TemplateRef.Args = out.TemplateRef.Args[:0]
	for _, name := range slices.Sorted(maps.Keys(args)) {
		out.TemplateRef.Args = append(out.TemplateRef.Args, appv1.AnalysisArg{Name: name, Value: args[name]})
	}
	if _, err := CustomQuery(out.Query, args, t, Interval(out)); err != nil {
		return nil, &TemplateError{Reason: appv1.ReasonAnalysisTemplateInvalid, Message: fmt.Sprintf("check %s: %s %s: %v", c.Name, kind, ref.Name, err)}
	}
	return out, nil
}

// templateArgs returns the values of spec's arguments given by ref, with spec's
// defaults; or a message naming the arguments ref gives that spec does not declare, or
// those without a default that ref does not give.
func templateArgs(spec *appv1.AnalysisTemplateSpec, ref *appv1.AnalysisTemplateRef) (map[string]string, string) {
	args := make(map[string]string, len(spec.Args))
	declared := make(map[string]bool, len(spec.Args))
	for _, a := range spec.Args {
		declared[a.Name] = true
		if a.Default != nil {
			args[a.Name] = *a.Default
		}
	}
	var unknown, missing []string
	for _, a := range ref.Args {
		if !declared[a.Name] {
			unknown = append(unknown, a.Name)
			continue
		}
		args[a.Name] = a.Value
	}
	for _, a := range spec.Args {
		if _, ok := args[a.Name]; !ok {
			missing = append(missing, a.Name)
		}
	}
	var problems []string
	if len(unknown) > 0 {
		problems = append(problems, "it declares no argument "+strings.Join(unknown, ", "))
	}
	if len(missing) > 0 {
		problems = append(problems, "argument "+strings.Join(missing, ", ")+" has no default and the check gives no value")
	}
	return args, strings.Join(problems, "; ")
}

// argsOf returns the arguments of a resolved check's template (nil: none).
func argsOf(c *appv1.AnalysisCheck) map[string]string {
	if c.TemplateRef == nil {
		return nil
	}
	args := make(map[string]string, len(c.TemplateRef.Args))
	for _, a := range c.TemplateRef.Args {
		args[a.Name] = a.Value
	}
	return args
}
