package plugin

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// testNow is the time of the tests' clock: a minute after the conditions' transitions.
var testNow = time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)

// withDeploymentStatus sets the App's status.deploymentStatus.
func withDeploymentStatus(u *unstructured.Unstructured, updated, ready, available, unavailable int64) *unstructured.Unstructured {
	return set(u, map[string]any{
		"replicas": updated, "updatedReplicas": updated, "readyReplicas": ready,
		"availableReplicas": available, "unavailableReplicas": unavailable,
	}, "status", "deploymentStatus")
}

func TestReadiness(t *testing.T) {
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Available", Message: "all good", ObservedGeneration: 2}
	tests := []struct {
		name      string
		mutate    func(*appv1.App)
		wantReady bool
		want      string
	}{
		{"Ready", func(*appv1.App) {}, true, "True, Available: all good"},
		{"Ready without message", func(a *appv1.App) { a.Status.Conditions[0].Message = "" }, true, "True, Available"},
		{"not Ready", func(a *appv1.App) {
			a.Status.Conditions[0].Status, a.Status.Conditions[0].Reason, a.Status.Conditions[0].Message = metav1.ConditionFalse, "NameConflict", `Deployment "d" already exists`
		}, false, `False, NameConflict: Deployment "d" already exists`},
		{"no Ready condition", func(a *appv1.App) { a.Status.Conditions = nil }, false,
			"Unknown: the controller has not reported a Ready condition yet"},
		{"Ready condition of an older generation", func(a *appv1.App) { a.Generation = 3 }, false,
			"Unknown: the Ready condition describes generation 2 of the App, which is at generation 3"},
		{"being deleted", func(a *appv1.App) { a.DeletionTimestamp = &metav1.Time{Time: testNow} }, false,
			"False: the App is being deleted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := &appv1.App{
				ObjectMeta: metav1.ObjectMeta{Generation: 2},
				Status:     appv1.AppStatus{Conditions: []metav1.Condition{ready}},
			}
			tt.mutate(app)
			gotReady, got := readiness(app)
			if gotReady != tt.wantReady || got != tt.want {
				t.Errorf("readiness = %t, %q; want %t, %q", gotReady, got, tt.wantReady, tt.want)
			}
		})
	}
}

func TestGetStatusService(t *testing.T) {
	app := readyApp("web", "web-deploy", "web-svc")
	tests := []struct {
		name        string
		objects     []*unstructured.Unstructured
		wantService bool
		wantNote    string
	}{
		{"controlled by the App", []*unstructured.Unstructured{app, service("web-svc", controlledBy(app))}, true, ""},
		{"does not exist", []*unstructured.Unstructured{app}, false, "web-svc: does not exist"},
		{"held by an object the App does not control", []*unstructured.Unstructured{app, service("web-svc", ownedBy(app))}, false,
			"web-svc: held by an object this App does not control (no controller)"},
		{"the App has no serviceTemplate", []*unstructured.Unstructured{readyApp("web", "web-deploy", "")}, false,
			"none (the App has no serviceTemplate)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakes(t, tt.objects)
			st, err := GetStatus(context.Background(), f.clients(), testNamespace, "web")
			if err != nil {
				t.Fatal(err)
			}
			if (st.Service != nil) != tt.wantService || st.ServiceNote != tt.wantNote {
				t.Errorf("service %v, note %q; want service %t, note %q", st.Service != nil, st.ServiceNote, tt.wantService, tt.wantNote)
			}
		})
	}
}

func TestPrintStatus(t *testing.T) {
	tests := []struct {
		name      string
		objects   []*unstructured.Unstructured
		wantReady bool
		want      string
	}{
		{
			name: "Ready",
			objects: []*unstructured.Unstructured{
				withDeploymentStatus(readyApp("web", "web-deploy", "web-svc"), 2, 2, 2, 0),
				service("web-svc", controlledBy(readyApp("web", "web-deploy", "web-svc"))),
				event("web.2", "uid-web", "Normal", "Synced", "App synced successfully", 1, 3*time.Second, 0),
				event("web.1", "uid-web", "Warning", "NameConflict", "Deployment \"web-deploy\" already exists\nand is not managed", 3, 50*time.Second, 10*time.Minute),
				event("other.1", "uid-other", "Normal", "Synced", "about another object", 1, time.Second, 0),
			},
			wantReady: true,
			want: `
App:          ns/web
Ready:        True, Available: Deployment "web-deploy": 2 of 2 replicas available; Service "web-svc" selects the App's pods
Deployment:   web-deploy (image nginx): 2 desired, 2 updated, 2 ready, 2 available
Service:      web-svc: ClusterIP 10.0.0.10, ports http 8080/TCP -> 8080

CONDITION       STATUS   REASON            AGE   MESSAGE
Ready           True     Available         60s   Deployment "web-deploy": 2 of 2 replicas available; Service "web-svc" selects the App's pods
Progressing     False    RolloutComplete   60s   Deployment "web-deploy": 2 of 2 replicas available
NamesAccepted   True     NoConflicts       60s   Every child name is held by this App

Pods:  <none>

Events:
  TYPE      REASON         AGE                 FROM             MESSAGE
  Warning   NameConflict   50s (x3 over 10m)   app-controller   Deployment "web-deploy" already exists and is not managed
  Normal    Synced         3s                  app-controller   App synced successfully
`,
		},
		{
			name: "autoscaled: the autoscaler's replicas and metrics",
			objects: []*unstructured.Unstructured{
				withDeploymentStatus(autoscaledApp("web", "web-deploy", ""), 3, 3, 3, 0),
				autoscaler("web-deploy", 3, 3, 41, hpaConditions(false), controlledBy(readyApp("web", "web-deploy", ""))),
			},
			wantReady: true,
			want: `
App:           ns/web
Ready:         True, Available: Deployment "web-deploy": 2 of 2 replicas available; Service "" selects the App's pods
Deployment:    web-deploy (image nginx): 3 desired, 3 updated, 3 ready, 3 available
Service:       none (the App has no serviceTemplate)
Autoscaling:   web-deploy: 3 of 1..3 replicas, desired 3, cpu 41%/50%

CONDITION       STATUS   REASON            AGE   MESSAGE
Ready           True     Available         60s   Deployment "web-deploy": 2 of 2 replicas available; Service "" selects the App's pods
Progressing     False    RolloutComplete   60s   Deployment "web-deploy": 2 of 2 replicas available
NamesAccepted   True     NoConflicts       60s   Every child name is held by this App

Pods:  <none>

Events:  <none>
`,
		},
		{
			name:      "autoscaled, the autoscaler not created yet",
			objects:   []*unstructured.Unstructured{withDeploymentStatus(autoscaledApp("web", "web-deploy", ""), 2, 2, 2, 0)},
			wantReady: true,
			want: `
App:           ns/web
Ready:         True, Available: Deployment "web-deploy": 2 of 2 replicas available; Service "" selects the App's pods
Deployment:    web-deploy (image nginx): 2 desired, 2 updated, 2 ready, 2 available
Service:       none (the App has no serviceTemplate)
Autoscaling:   web-deploy: does not exist

CONDITION       STATUS   REASON            AGE   MESSAGE
Ready           True     Available         60s   Deployment "web-deploy": 2 of 2 replicas available; Service "" selects the App's pods
Progressing     False    RolloutComplete   60s   Deployment "web-deploy": 2 of 2 replicas available
NamesAccepted   True     NoConflicts       60s   Every child name is held by this App

Pods:  <none>

Events:  <none>
`,
		},
		{
			name: "name conflict",
			objects: []*unstructured.Unstructured{
				newApp("web", "web-deploy", "web-svc",
					cond("NamesAccepted", "False", "NameConflict", `Deployment "web-deploy" already exists and is not managed by App "web"`, 1),
					cond("Ready", "False", "NameConflict", `Deployment "web-deploy" already exists and is not managed by App "web"`, 1),
				),
				service("web-svc", controlledBy(readyApp("web", "web-deploy", "web-svc"))),
			},
			want: `
App:          ns/web
Ready:        False, NameConflict: Deployment "web-deploy" already exists and is not managed by App "web"
Deployment:   web-deploy (image nginx): 2 desired, no status reported
Service:      web-svc: ClusterIP 10.0.0.10, ports http 8080/TCP -> 8080

CONDITION       STATUS   REASON         AGE   MESSAGE
Ready           False    NameConflict   60s   Deployment "web-deploy" already exists and is not managed by App "web"
NamesAccepted   False    NameConflict   60s   Deployment "web-deploy" already exists and is not managed by App "web"

Pods:  <none>

Events:  <none>
`,
		},
		{
			name:    "no status yet, no Service yet",
			objects: []*unstructured.Unstructured{newApp("web", "web-deploy", "web-svc")},
			want: `
App:          ns/web
Ready:        Unknown: the controller has not reported a Ready condition yet
Deployment:   web-deploy (image nginx): 2 desired, no status reported
Service:      web-svc: does not exist

No conditions reported yet.

Pods:  <none>

Events:  <none>
`,
		},
		{
			name: "rolling out",
			objects: []*unstructured.Unstructured{
				withDeploymentStatus(newApp("web", "web-deploy", "",
					cond("Ready", "False", "RollingOut", `Deployment "web-deploy": 1 of 2 updated replicas available`, 1),
				), 2, 1, 1, 1),
				appPod("web-deploy-5c9f-aaaaa", readyContainer()),
				appPod("web-deploy-5c9f-bbbbb", map[string]any{
					"name": "app-deploy-container", "ready": false, "restartCount": int64(0),
					"state": map[string]any{"waiting": map[string]any{"reason": "ImagePullBackOff",
						"message": `Back-off pulling image "registry/nope:1": ErrImagePull: failed to pull and unpack image "registry/nope:1": not found`}},
				}),
				set(appPod("other-app-pod", readyContainer()), "other", "metadata", "labels", appv1.InstanceLabel),
			},
			want: `
App:          ns/web
Ready:        False, RollingOut: Deployment "web-deploy": 1 of 2 updated replicas available
Deployment:   web-deploy (image nginx): 2 desired, 2 updated, 1 ready, 1 available, 1 unavailable
Service:      none (the App has no serviceTemplate)

CONDITION   STATUS   REASON       AGE   MESSAGE
Ready       False    RollingOut   60s   Deployment "web-deploy": 1 of 2 updated replicas available

Pods:
  NAME                    PHASE     READY   RESTARTS   AGE   PROBLEM
  web-deploy-5c9f-aaaaa   Running   1/1     0          60s   <none>
  web-deploy-5c9f-bbbbb   Pending   0/1     0          60s   ImagePullFailed: Pod "web-deploy-5c9f-bbbbb" container "app-deploy-container" cannot pull its image: failed to pull and unpack image "registry/nope:1": not found

Events:  <none>
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakes(t, tt.objects)
			st, err := GetStatus(context.Background(), f.clients(), testNamespace, "web")
			if err != nil {
				t.Fatal(err)
			}
			if st.Ready != tt.wantReady {
				t.Errorf("Ready = %t, want %t", st.Ready, tt.wantReady)
			}
			var out bytes.Buffer
			if err := PrintStatus(&out, st, testNow); err != nil {
				t.Fatal(err)
			}
			if got, want := out.String(), strings.TrimPrefix(tt.want, "\n"); got != want {
				t.Errorf("status:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestServiceLine(t *testing.T) {
	tests := []struct {
		name string
		svc  corev1.Service
		want string
	}{
		{
			name: "NodePort with two ports, a named target port",
			svc: corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "s"},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.0.0.1", Ports: []corev1.ServicePort{
					{Name: "http", Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http")},
					{Port: 53, NodePort: 30053, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)},
				}},
			},
			want: "s: NodePort 10.0.0.1, ports http 80:30080/TCP -> http, 53:30053/UDP -> 5353",
		},
		{
			name: "LoadBalancer waiting for an address",
			svc: corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "s"},
				Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.0.0.1"},
			},
			want: "s: LoadBalancer 10.0.0.1, no ports, external <pending>",
		},
		{
			name: "LoadBalancer with addresses",
			svc: corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "s"},
				Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.0.0.1", Ports: []corev1.ServicePort{{Port: 443, Protocol: corev1.ProtocolTCP}}},
				Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
					{IP: "203.0.113.7"}, {Hostname: "lb.example.com"},
				}}},
			},
			want: "s: LoadBalancer 10.0.0.1, ports 443/TCP, external 203.0.113.7, lb.example.com",
		},
		{
			name: "headless, type unset",
			svc:  corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: corev1.ServiceSpec{ClusterIP: "None"}},
			want: "s: ClusterIP None, no ports",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := serviceLine(&tt.svc); got != tt.want {
				t.Errorf("serviceLine = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDeploymentLine(t *testing.T) {
	tests := []struct {
		name string
		app  appv1.App
		want string
	}{
		{"no deploymentTemplate", appv1.App{}, "none (the App has no deploymentTemplate)"},
		{"replicas unset, nothing reported yet: 1", appv1.App{Spec: appv1.AppSpec{DeploymentTemplate: &appv1.DeploymentTemplate{Name: "d", Image: "i"}}},
			"d (image i): 1 desired, no status reported"},
		{"replicas unset: the Deployment's, as its autoscaler set it", appv1.App{
			Spec:   appv1.AppSpec{DeploymentTemplate: &appv1.DeploymentTemplate{Name: "d", Image: "i"}},
			Status: appv1.AppStatus{DeploymentStatus: &appsv1.DeploymentStatus{Replicas: 4, UpdatedReplicas: 4, ReadyReplicas: 4, AvailableReplicas: 4}},
		}, "d (image i): 4 desired, 4 updated, 4 ready, 4 available"},
		{"scaled to zero", appv1.App{
			Spec:   appv1.AppSpec{DeploymentTemplate: &appv1.DeploymentTemplate{Name: "d", Image: "i", Replicas: ptr.To[int32](0)}},
			Status: appv1.AppStatus{DeploymentStatus: &appsv1.DeploymentStatus{}},
		}, "d (image i): 0 desired, 0 updated, 0 ready, 0 available"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := deploymentLine(&tt.app); got != tt.want {
				t.Errorf("deploymentLine = %q, want %q", got, tt.want)
			}
		})
	}
}

// event returns a core/v1 Event about the object of UID uid, last seen ago before
// testNow, count times since first (0: at the last time), from app-controller.
func event(name string, uid types.UID, typ, reason, message string, count int64, ago, first time.Duration) *unstructured.Unstructured {
	u := newObject("v1", "Event", name, types.UID("uid-event-"+name))
	last := testNow.Add(-ago)
	firstSeen := last
	if first > 0 {
		firstSeen = testNow.Add(-first)
	}
	set(u, map[string]any{"kind": "App", "name": "web", "namespace": testNamespace, "uid": string(uid)}, "involvedObject")
	set(u, typ, "type")
	set(u, reason, "reason")
	set(u, message, "message")
	set(u, count, "count")
	set(u, last.Format(time.RFC3339), "lastTimestamp")
	set(u, firstSeen.Format(time.RFC3339), "firstTimestamp")
	set(u, map[string]any{"component": "app-controller"}, "source")
	return u
}

// appPod returns a pod of the App "web" with one container status; Running when the
// container is ready, else Pending.
func appPod(name string, container map[string]any) *unstructured.Unstructured {
	u := newObject("v1", "Pod", name, types.UID("uid-"+name))
	u.SetLabels(map[string]string{appv1.NameLabel: "web", appv1.InstanceLabel: "web", "pod-template-hash": "5c9f"})
	u.SetCreationTimestamp(metav1.NewTime(testNow.Add(-time.Minute)))
	phase := "Pending"
	if container["ready"] == true {
		phase = "Running"
	}
	set(u, map[string]any{"phase": phase, "containerStatuses": []any{container}}, "status")
	return u
}

// readyContainer is the status of a ready, running container.
func readyContainer() map[string]any {
	return map[string]any{"name": "app-deploy-container", "ready": true, "restartCount": int64(0),
		"state": map[string]any{"running": map[string]any{"startedAt": "2026-01-01T00:00:00Z"}}}
}
