// Package gitops runs the App health checks GitOps tools use, for tests: the Argo CD
// health check in Lua (config/argocd/health.lua) on gopher-lua, the Lua engine Argo CD
// embeds, and kstatus, which Flux, kubectl wait and cli-utils use; and maps one onto
// the other. Its tests run both on Apps captured from the real controller
// (testdata/*.json, written by test/integration/observability).
package gitops

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// Argo CD health statuses the App health check returns.
const (
	Healthy     = "Healthy"
	Progressing = "Progressing"
	Degraded    = "Degraded"
	// Suspended: a canary rollout paused, waiting for a person (kubectl app promote).
	Suspended = "Suspended"
)

// ArgoHealth is what an Argo CD health check returns.
type ArgoHealth struct {
	Status  string
	Message string
}

// Object returns app as Argo CD and kstatus get it, through JSON: the App (its apiVersion
// and kind set, its managedFields left out) as a map, numbers as float64, and as JSON
// text, its keys sorted (as testdata's captures have them).
func Object(app *appv1.App) (map[string]any, []byte, error) {
	a := app.DeepCopy()
	a.ManagedFields = nil
	a.APIVersion, a.Kind = appv1.GroupVersion.String(), "App"
	data, err := json.Marshal(a)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding App %s: %w", app.Name, err)
	}
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, nil, fmt.Errorf("decoding App %s: %w", app.Name, err)
	}
	if data, err = json.Marshal(obj); err != nil {
		return nil, nil, fmt.Errorf("encoding App %s: %w", app.Name, err)
	}
	return obj, data, nil
}

// RunArgoHealth runs the Argo CD health check script at path on obj, as Argo CD does:
// the object is the global obj, the script returns a table with status and message.
func RunArgoHealth(path string, obj map[string]any) (ArgoHealth, error) {
	script, err := os.ReadFile(path)
	if err != nil {
		return ArgoHealth{}, fmt.Errorf("reading the health check: %w", err)
	}
	l := lua.NewState(lua.Options{SkipOpenLibs: false})
	defer l.Close()
	l.SetGlobal("obj", toLua(l, obj))
	if err := l.DoString(string(script)); err != nil {
		return ArgoHealth{}, fmt.Errorf("running the health check %s: %w", path, err)
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return ArgoHealth{}, fmt.Errorf("the health check %s returned %s, not a table", path, l.Get(-1).Type())
	}
	return ArgoHealth{
		Status:  lua.LVAsString(ret.RawGetString("status")),
		Message: lua.LVAsString(ret.RawGetString("message")),
	}, nil
}

// toLua converts a JSON value (as encoding/json decodes into any) to a Lua value, as
// Argo CD passes objects to health checks: objects and arrays are tables, arrays
// indexed from 1.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case []any:
		t := l.NewTable()
		for _, item := range v {
			t.Append(toLua(l, item))
		}
		return t
	case map[string]any:
		t := l.NewTable()
		for key, item := range v {
			t.RawSetString(key, toLua(l, item))
		}
		return t
	default:
		return lua.LString(fmt.Sprint(v))
	}
}

// Health returns the kstatus status of obj and what the Argo CD health check at path
// says of it: the two readings the tests hold against each other.
func Health(path string, obj map[string]any) (status.Status, ArgoHealth, error) {
	ks, err := Kstatus(obj)
	if err != nil {
		return "", ArgoHealth{}, err
	}
	argo, err := RunArgoHealth(path, obj)
	return ks, argo, err
}

// Reading is an App as the GitOps tools read it.
type Reading struct {
	// Object and JSON are the App as Object returns it.
	Object map[string]any
	JSON   []byte
	// Kstatus and Argo are what kstatus and the Argo CD health check read of it.
	Kstatus status.Status
	Argo    ArgoHealth
}

// Read returns app as Object does and what kstatus and the Argo CD health check at path
// read of it (Health).
func Read(path string, app *appv1.App) (Reading, error) {
	obj, data, err := Object(app)
	if err != nil {
		return Reading{}, err
	}
	ks, argo, err := Health(path, obj)
	if err != nil {
		return Reading{}, err
	}
	return Reading{Object: obj, JSON: data, Kstatus: ks, Argo: argo}, nil
}

// WriteCapture writes data, an App's JSON as Object returns it, to path, indented by two
// spaces, with a newline at the end. masks are pairs of a string and its mask (a
// registry's address and "REGISTRY", a namespace and "NAMESPACE"), replaced in turn.
func WriteCapture(path string, data []byte, masks ...string) error {
	if len(masks)%2 != 0 {
		return fmt.Errorf("masks %q: not pairs", masks)
	}
	text := string(data)
	for i := 0; i < len(masks); i += 2 {
		text = strings.ReplaceAll(text, masks[i], masks[i+1])
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, []byte(text), "", "  "); err != nil {
		return err
	}
	pretty.WriteByte('\n')
	return os.WriteFile(path, pretty.Bytes(), 0o644)
}

// Kstatus computes the kstatus status of obj. The object goes through JSON as the API
// machinery decodes it (integers as int64), whatever obj holds.
func Kstatus(obj map[string]any) (status.Status, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return "", fmt.Errorf("encoding the object: %w", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return "", fmt.Errorf("decoding the object: %w", err)
	}
	res, err := status.Compute(u)
	if err != nil {
		return "", fmt.Errorf("computing the kstatus status: %w", err)
	}
	return res.Status, nil
}

// Agree reports whether an Argo CD health status agrees with a kstatus status: argo is
// ArgoFor(s), or Suspended for InProgress (a paused rollout, which kstatus has no word
// for: it is not done, and it waits for a person).
func Agree(s status.Status, argo string) bool {
	return argo == ArgoFor(s) || s == status.InProgressStatus && argo == Suspended
}

// ArgoFor is the Argo CD health status that agrees with a kstatus status: Current is
// Healthy, Failed is Degraded, InProgress and Terminating are Progressing.
func ArgoFor(s status.Status) string {
	switch s {
	case status.CurrentStatus:
		return Healthy
	case status.FailedStatus:
		return Degraded
	default:
		return Progressing
	}
}
