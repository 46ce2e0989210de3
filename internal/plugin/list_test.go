package plugin

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestListApps(t *testing.T) {
	inOther := readyApp("api", "api-deploy", "")
	inOther.SetNamespace("other")
	inOther.SetUID("uid-other-api")
	stale := readyApp("old", "old-deploy", "old-svc")
	stale.SetGeneration(2)
	objects := []*unstructured.Unstructured{
		withDeploymentStatus(readyApp("web", "web-deploy", "web-svc"), 2, 2, 2, 0),
		newApp("new", "", "new-svc"),
		newApp("clash", "clash-deploy", "",
			cond("Ready", "False", "NameConflict", `Deployment "clash-deploy" already exists`, 1)),
		stale,
		withDeploymentStatus(inOther, 2, 1, 1, 1),
	}
	// The others have no creationTimestamp: their AGE is <unknown>.
	objects[0].SetCreationTimestamp(metav1.NewTime(testNow.Add(-90 * time.Minute)))

	tests := []struct {
		name      string
		namespace string
		want      string
	}{
		{
			name:      "one namespace",
			namespace: testNamespace,
			want: `
NAME    READY     REASON                  AVAILABLE   AGE
clash   False     NameConflict            0/2         <unknown>
new     Unknown   <none>                  -           <unknown>
old     Unknown   GenerationNotObserved   0/2         <unknown>
web     True      Available               2/2         90m
`,
		},
		{
			name: "every namespace",
			want: `
NAMESPACE   NAME    READY     REASON                  AVAILABLE   AGE
ns          clash   False     NameConflict            0/2         <unknown>
ns          new     Unknown   <none>                  -           <unknown>
ns          old     Unknown   GenerationNotObserved   0/2         <unknown>
ns          web     True      Available               2/2         90m
other       api     True      Available               1/2         <unknown>
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakes(t, objects)
			apps, err := ListApps(context.Background(), f.clients(), tt.namespace)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := PrintList(&out, apps, tt.namespace == "", false, testNow); err != nil {
				t.Fatal(err)
			}
			if got, want := out.String(), strings.TrimPrefix(tt.want, "\n"); got != want {
				t.Errorf("list:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}
