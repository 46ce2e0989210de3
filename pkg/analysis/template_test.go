package analysis

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// fakeTemplates holds templates by "kind/namespace/name" (no namespace for a
// ClusterAnalysisTemplate), and records the look-ups.
type fakeTemplates struct {
	specs   map[string]*appv1.AnalysisTemplateSpec
	err     error
	lookups []string
}

func (f *fakeTemplates) Template(kind appv1.AnalysisTemplateKind, namespace, name string) (*appv1.AnalysisTemplateSpec, error) {
	if kind == appv1.AnalysisTemplateKindCluster {
		namespace = ""
	}
	key := string(kind) + "/" + namespace + "/" + name
	f.lookups = append(f.lookups, key)
	return f.specs[key], f.err
}

func TestResolve(t *testing.T) {
	errorRatio := &appv1.AnalysisTemplateSpec{
		Args: []appv1.AnalysisTemplateArg{{Name: "code", Default: ptr.To("5..")}, {Name: "route"}},
		Query: appv1.QueryCheck{
			PromQL:           `sum(rate(reqs{namespace="{{.Namespace}}",service="{{.CanaryService}}",route="{{.Args.route}}",code=~"{{.Args.code}}"}[{{.Interval}}]))`,
			SuccessCondition: &appv1.ValueRange{Max: ptr.To("0.01")},
		},
	}
	broken := &appv1.AnalysisTemplateSpec{Query: appv1.QueryCheck{PromQL: `x{a="{{.Args.undeclared}}"}`, SuccessCondition: &appv1.ValueRange{Max: ptr.To("1")}}}
	unparsable := &appv1.AnalysisTemplateSpec{Query: appv1.QueryCheck{PromQL: `x{a="{{.App"}`, SuccessCondition: &appv1.ValueRange{Max: ptr.To("1")}}}
	templates := &fakeTemplates{specs: map[string]*appv1.AnalysisTemplateSpec{
		"AnalysisTemplate/shop/error-ratio":    errorRatio,
		"ClusterAnalysisTemplate//error-ratio": errorRatio,
		"AnalysisTemplate/shop/broken":         broken,
		"AnalysisTemplate/shop/unparsable":     unparsable,
	}}
	check := func(kind appv1.AnalysisTemplateKind, name string, args ...appv1.AnalysisArg) *appv1.AnalysisCheck {
		return &appv1.AnalysisCheck{Name: "errors", Interval: &metav1.Duration{Duration: 2 * time.Minute},
			TemplateRef: &appv1.AnalysisTemplateRef{Kind: kind, Name: name, Args: args}}
	}
	wantQuery := `sum(rate(reqs{namespace="shop",service="web-canary",route="/api",code=~"5.."}[120s]))`
	tests := []struct {
		name   string
		check  *appv1.AnalysisCheck
		lookup string
		// wantQuery and wantArgs when it resolves; wantReason and a part of the message
		// when it does not.
		wantQuery   string
		wantArgs    []appv1.AnalysisArg
		wantReason  string
		wantMessage string
	}{
		{name: "namespaced, a default and a given argument", check: check(appv1.AnalysisTemplateKindNamespaced, "error-ratio", appv1.AnalysisArg{Name: "route", Value: "/api"}),
			lookup: "AnalysisTemplate/shop/error-ratio", wantQuery: wantQuery,
			wantArgs: []appv1.AnalysisArg{{Name: "code", Value: "5.."}, {Name: "route", Value: "/api"}}},
		{name: "kind unset is AnalysisTemplate", check: check("", "error-ratio", appv1.AnalysisArg{Name: "route", Value: "/api"}),
			lookup: "AnalysisTemplate/shop/error-ratio", wantQuery: wantQuery,
			wantArgs: []appv1.AnalysisArg{{Name: "code", Value: "5.."}, {Name: "route", Value: "/api"}}},
		{name: "cluster-wide, a default overridden", check: check(appv1.AnalysisTemplateKindCluster, "error-ratio",
			appv1.AnalysisArg{Name: "route", Value: "/api"}, appv1.AnalysisArg{Name: "code", Value: "50[23]"}),
			lookup:    "ClusterAnalysisTemplate//error-ratio",
			wantQuery: `sum(rate(reqs{namespace="shop",service="web-canary",route="/api",code=~"50[23]"}[120s]))`,
			wantArgs:  []appv1.AnalysisArg{{Name: "code", Value: "50[23]"}, {Name: "route", Value: "/api"}}},
		{name: "missing", check: check(appv1.AnalysisTemplateKindNamespaced, "nope"), lookup: "AnalysisTemplate/shop/nope",
			wantReason: appv1.ReasonAnalysisTemplateNotFound, wantMessage: "check errors: AnalysisTemplate nope not found in namespace shop: the check waits for it until progressDeadlineSeconds"},
		{name: "missing cluster-wide", check: check(appv1.AnalysisTemplateKindCluster, "nope"), lookup: "ClusterAnalysisTemplate//nope",
			wantReason: appv1.ReasonAnalysisTemplateNotFound, wantMessage: "check errors: ClusterAnalysisTemplate nope not found: the check waits"},
		{name: "a namespaced template of another namespace is not found", check: check(appv1.AnalysisTemplateKindNamespaced, "p95"), lookup: "AnalysisTemplate/shop/p95",
			wantReason: appv1.ReasonAnalysisTemplateNotFound, wantMessage: "not found in namespace shop"},
		{name: "a required argument not given", check: check(appv1.AnalysisTemplateKindNamespaced, "error-ratio"), lookup: "AnalysisTemplate/shop/error-ratio",
			wantReason: appv1.ReasonAnalysisTemplateInvalid, wantMessage: "check errors: AnalysisTemplate error-ratio: argument route has no default and the check gives no value"},
		{name: "an argument the template does not declare", check: check(appv1.AnalysisTemplateKindNamespaced, "error-ratio",
			appv1.AnalysisArg{Name: "route", Value: "/"}, appv1.AnalysisArg{Name: "zone", Value: "a"}), lookup: "AnalysisTemplate/shop/error-ratio",
			wantReason: appv1.ReasonAnalysisTemplateInvalid, wantMessage: "it declares no argument zone"},
		{name: "the query uses an argument it does not declare", check: check(appv1.AnalysisTemplateKindNamespaced, "broken"), lookup: "AnalysisTemplate/shop/broken",
			wantReason: appv1.ReasonAnalysisTemplateInvalid, wantMessage: `map has no entry for key "undeclared"`},
		{name: "a query that does not parse", check: check(appv1.AnalysisTemplateKindNamespaced, "unparsable"), lookup: "AnalysisTemplate/shop/unparsable",
			wantReason: appv1.ReasonAnalysisTemplateInvalid, wantMessage: "parsing the query's template"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			templates.lookups = nil
			before := tt.check.DeepCopy()
			got, terr := Resolve(tt.check, target, templates)
			if diff := diffOf(before, tt.check); diff != "" {
				t.Errorf("Resolve changed the check (-before +after):\n%s", diff)
			}
			if diff := diffOf([]string{tt.lookup}, templates.lookups); diff != "" {
				t.Errorf("look-ups (-want +got):\n%s", diff)
			}
			if tt.wantReason != "" {
				if terr == nil || terr.Reason != tt.wantReason || !strings.Contains(terr.Message, tt.wantMessage) {
					t.Fatalf("Resolve = %v, %+v; want reason %s, a message with %q", got, terr, tt.wantReason, tt.wantMessage)
				}
				return
			}
			if terr != nil {
				t.Fatalf("Resolve: %v", terr)
			}
			q, err := CustomQuery(got.Query, argsOf(got), target, Interval(got))
			if err != nil || q != tt.wantQuery {
				t.Errorf("query = %q, %v; want %q", q, err, tt.wantQuery)
			}
			if diff := diffOf(tt.wantArgs, got.TemplateRef.Args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
			if diff := diffOf(errorRatio.Query.SuccessCondition, got.Query.SuccessCondition); diff != "" {
				t.Errorf("successCondition (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("a check of its own is returned as it is", func(t *testing.T) {
		c := &appv1.AnalysisCheck{Name: "q", Query: &appv1.QueryCheck{PromQL: "1"}}
		if got, terr := Resolve(c, target, templates); got != c || terr != nil {
			t.Errorf("Resolve = %v, %v; want the check itself", got, terr)
		}
	})
	t.Run("no template informers (no CRD): not found, saying so", func(t *testing.T) {
		if _, terr := Resolve(check("", "error-ratio"), target, nil); terr == nil || terr.Reason != appv1.ReasonAnalysisTemplateNotFound ||
			!strings.Contains(terr.Message, "found no AnalysisTemplate CRD") {
			t.Errorf("Resolve = %+v; want AnalysisTemplateNotFound", terr)
		}
	})
	t.Run("a look-up that fails", func(t *testing.T) {
		failing := &fakeTemplates{err: errors.New("boom")}
		if _, terr := Resolve(check("", "error-ratio"), target, failing); terr == nil || !strings.Contains(terr.Message, "reading AnalysisTemplate error-ratio in namespace shop: boom") {
			t.Errorf("Resolve = %+v; want the error", terr)
		}
	})
	t.Run("an inline query has no arguments", func(t *testing.T) {
		if _, err := CustomQuery(&appv1.QueryCheck{PromQL: `x{a="{{.Args.route}}"}`}, nil, target, time.Minute); err == nil {
			t.Error("CustomQuery of {{.Args.route}} without arguments: no error")
		}
	})
}

// TestMeasureTemplate measures a resolved check: the query sent is the template's,
// filled in, and the template's conditions judge the value; an unresolved one is never
// sent.
func TestMeasureTemplate(t *testing.T) {
	templates := &fakeTemplates{specs: map[string]*appv1.AnalysisTemplateSpec{
		"ClusterAnalysisTemplate//p95": {
			Args:  []appv1.AnalysisTemplateArg{{Name: "q", Default: ptr.To("0.95")}},
			Query: appv1.QueryCheck{PromQL: `histogram_quantile({{.Args.q}}, x{app="{{.App}}"})`, SuccessCondition: &appv1.ValueRange{Max: ptr.To("0.3")}},
		},
	}}
	c := &appv1.AnalysisCheck{Name: "p95", TemplateRef: &appv1.AnalysisTemplateRef{Kind: appv1.AnalysisTemplateKindCluster, Name: "p95"}}
	resolved, terr := Resolve(c, target, templates)
	if terr != nil {
		t.Fatalf("Resolve: %v", terr)
	}
	api := &fakeAPI{answer: model.Vector{{Value: 0.42}}}
	a := &Analyzer{Prometheus: api}
	m := a.Measure(context.Background(), resolved, target, time.Now())
	if m.Phase != appv1.AnalysisFailed || m.Value != "0.42" || m.Threshold != "[-inf, 0.3]" {
		t.Errorf("Measure = %+v; want Failed 0.42 against [-inf, 0.3]", m)
	}
	if want := []string{`histogram_quantile(0.95, x{app="web"})`}; !reflect.DeepEqual(want, api.queries) {
		t.Errorf("queries = %q, want %q", api.queries, want)
	}
	if m := a.Measure(context.Background(), c, target, time.Now()); m.Phase != appv1.AnalysisError || len(api.queries) != 1 {
		t.Errorf("Measure of an unresolved check = %+v after %d queries; want Error and no query", m, len(api.queries))
	}
}

// TestUnresolved: a check whose template is missing keeps its counts, is not due by
// time (its template's event brings it back), and is measured at once once resolved.
func TestUnresolved(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC))
	ref := &appv1.AnalysisTemplateRef{Kind: appv1.AnalysisTemplateKindNamespaced, Name: "x"}
	st := appv1.CheckStatus{Name: "c", Step: 1, Phase: appv1.AnalysisPassed, Value: "1", MeasuredAt: &at, Passed: 2, Inconclusive: 1}
	st = Unresolved(st, ref, &TemplateError{Reason: appv1.ReasonAnalysisTemplateNotFound, Message: "gone"})
	want := appv1.CheckStatus{Name: "c", Step: 1, Template: "AnalysisTemplate/x", Phase: appv1.AnalysisError, Reason: appv1.ReasonAnalysisTemplateNotFound,
		Message: "gone", Passed: 2, Inconclusive: 1}
	if diff := diffOf(want, st); diff != "" {
		t.Errorf("Unresolved (-want +got):\n%s", diff)
	}
	check := &appv1.AnalysisCheck{Name: "c", TemplateRef: ref}
	// Its step started long before: a resolved check is due at once.
	started := at.Add(-time.Hour)
	if got := NextDue([]Active{{Check: check, Step: 1}}, []appv1.CheckStatus{st}, started); !got.IsZero() {
		t.Errorf("NextDue = %v; want none", got)
	}
	if got := FirstUnresolved([]appv1.CheckStatus{{Name: "a"}, st}); got == nil || got.Name != "c" {
		t.Errorf("FirstUnresolved = %v; want c", got)
	}
	// Resolved again: a check not measured yet, its counts kept, due as the others.
	if r := Resolved(st); r.Reason != "" || r.Phase != "" || r.Message != "" || r.Passed != 2 || r.Inconclusive != 1 {
		t.Errorf("Resolved = %+v; want no reason, no phase, the counts kept", r)
	} else if got := NextDue([]Active{{Check: check, Step: 1}}, []appv1.CheckStatus{r}, started); got.IsZero() {
		t.Error("NextDue of the resolved check = none; want one")
	}
	if !Due(check, &st, started, at.Time) {
		t.Error("Due = false; want true (measured at once once resolved)")
	}
	st = Record(st, Measurement{Phase: appv1.AnalysisPassed, Value: "0.1"}, at.Time)
	if st.Reason != "" || st.Passed != 3 || st.Template != "AnalysisTemplate/x" {
		t.Errorf("Record after Unresolved = %+v; want no reason, 3 passed, the template kept", st)
	}
}

// diffOf says how want and got differ; "" when they are deeply equal.
func diffOf(want, got any) string {
	if reflect.DeepEqual(want, got) {
		return ""
	}
	return fmt.Sprintf("want %+v\n got %+v", want, got)
}
