package nodelabel

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/controller/nodelabel"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/integration/framework"
)

const (
	pool      = "it.example.com/pool"
	joinedVia = "it.example.com/joined-via"
	contested = "it.example.com/contested"
	extra     = "it.example.com/extra"
	owner     = "it.example.com/owner"
)

// rules match the test's kwok nodes (provider ID, name and a label the test controls)
// and disagree on joined-via, which the first rule wins.
const rules = `
rules:
- name: it-kwok
  match:
    providerIDPrefix: "kwok://"
    nameRegex: "nl-.*"
    labelSelector:
      matchLabels: {it.example.com/pool: blue}
  labels:
    it.example.com/joined-via: kwok
    it.example.com/contested: rule
- name: it-shadow
  match:
    nameRegex: "nl-.*"
    labelSelector:
      matchLabels: {it.example.com/pool: blue}
  labels:
    it.example.com/joined-via: shadow
    it.example.com/extra: "yes"
`

// TestNodeLabels runs the labeler on a node present at start and one created after:
// both get the labels, the first rule wins a disagreement, a label someone else set is
// left alone and reported, and the labels go when a node stops matching while foreign
// labels stay.
func TestNodeLabels(t *testing.T) {
	kube := framework.Client(t)

	// Present at start: matching, with a foreign label and a foreign value for a label
	// the rule sets.
	createNode(t, kube, "nl-present", map[string]string{pool: "blue", owner: "admin", contested: "manual"})
	startManager(t, []string{nodelabel.ControllerName}, writeConfig(t, rules))

	node := waitLabels(t, kube, "nl-present", func(l map[string]string) bool {
		return l[joinedVia] == "kwok" && l[extra] == "yes"
	})
	if node.Labels[owner] != "admin" || node.Labels[contested] != "manual" {
		t.Errorf("foreign labels changed: %v", node.Labels)
	}
	if got := labelManagers(node, contested); !slices.Equal(got, []string{adminManager}) {
		t.Errorf("managers of %s = %v, want only %s", contested, got, adminManager)
	}
	if got := labelManagers(node, joinedVia); !slices.Equal(got, []string{nodelabel.FieldManager}) {
		t.Errorf("managers of %s = %v, want only %s", joinedVia, got, nodelabel.FieldManager)
	}
	if node.Annotations[controller.AppliedConfigHashAnnotation] == "" {
		t.Errorf("no %s annotation on a labelled node", controller.AppliedConfigHashAnnotation)
	}
	msg := waitEvent(t, kube, "nl-present", "Warning "+nodelabel.ReasonLabelConflict)
	if !strings.Contains(msg, contested) || !strings.Contains(msg, adminManager) {
		t.Errorf("conflict event %q does not name the label and its owner", msg)
	}
	msg = waitEvent(t, kube, "nl-present", "Warning "+nodelabel.ReasonRuleConflict)
	if !strings.Contains(msg, `"it-kwok"`) || !strings.Contains(msg, `"it-shadow"`) || !strings.Contains(msg, joinedVia) {
		t.Errorf("rule conflict event %q does not name both rules and the label", msg)
	}

	// Created after start.
	createNode(t, kube, "nl-late", map[string]string{pool: "blue"})
	waitLabels(t, kube, "nl-late", func(l map[string]string) bool {
		return l[joinedVia] == "kwok" && l[contested] == "rule" && l[extra] == "yes"
	})
	waitEvent(t, kube, "nl-late", "Normal "+nodelabel.ReasonLabelsApplied)

	// The node stops matching: the labeler's labels go; kwok's and the admin's stay.
	setLabels(t, kube, "nl-late", map[string]string{pool: "", owner: "admin"})
	node = waitLabels(t, kube, "nl-late", func(l map[string]string) bool {
		_, j := l[joinedVia]
		_, c := l[contested]
		_, e := l[extra]
		return !j && !c && !e
	})
	if node.Labels["type"] != "kwok" || node.Labels[corev1.LabelHostname] != "nl-late" || node.Labels[owner] != "admin" {
		t.Errorf("foreign labels removed: %v", node.Labels)
	}
	if _, found := node.Annotations[controller.AppliedConfigHashAnnotation]; found {
		t.Errorf("hash annotation left on a node that matches no rule")
	}
	waitEvent(t, kube, "nl-late", "Normal "+nodelabel.ReasonLabelsRemoved)

	// It matches again: labelled again.
	setLabels(t, kube, "nl-late", map[string]string{pool: "blue"})
	waitLabels(t, kube, "nl-late", func(l map[string]string) bool { return l[joinedVia] == "kwok" })

	// The admin gives up the contested label: the rule's value is applied.
	setLabels(t, kube, "nl-present", map[string]string{contested: ""})
	waitLabels(t, kube, "nl-present", func(l map[string]string) bool { return l[contested] == "rule" })

	// kwok-node-0 matches the provider ID but not the name: untouched.
	for _, key := range []string{joinedVia, contested, extra} {
		if v, found := getNode(t, kube, localcluster.DefaultNodeName).Labels[key]; found {
			t.Errorf("%s labelled %s=%s", localcluster.DefaultNodeName, key, v)
		}
	}
}

// TestNodeLabelerDisabled checks that --controllers=-nodelabel leaves nodes alone and
// does not even read the configuration, and that without --node-label-config the
// labeler is idle.
func TestNodeLabelerDisabled(t *testing.T) {
	kube := framework.Client(t)
	invalid := writeConfig(t, "rules:\n- name: broken\n  match: {nameRegex: \"(\"}\n  labels: {k: v}\n")
	valid := writeConfig(t, rules)

	tests := []struct {
		name        string
		node        string
		controllers []string
		config      string
	}{
		{"disabled with an invalid config", "nl-disabled", []string{"*", "-" + nodelabel.ControllerName}, invalid},
		{"disabled with a valid config", "nl-disabled-valid", []string{"*", "-" + nodelabel.ControllerName}, valid},
		{"enabled without a config", "nl-idle", []string{"ingress", nodelabel.ControllerName}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			createNode(t, kube, tt.node, map[string]string{pool: "blue"})
			startManager(t, tt.controllers, tt.config)

			// The ingress controller proves that the manager is up and syncing.
			if controllermanager.IsControllerEnabled("ingress", tt.controllers) {
				waitIngressControllerRuns(t, kube, framework.Namespace(t))
			}
			// Give a running labeler ample time to act, then check it did not.
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				node := getNode(t, kube, tt.node)
				if _, found := node.Labels[joinedVia]; found || len(labelManagers(node, joinedVia)) > 0 {
					t.Fatalf("node labelled by a disabled or idle labeler: %v", node.Labels)
				}
				time.Sleep(500 * time.Millisecond)
			}
		})
	}
}

// TestInvalidConfigDisablesNodeLabeler checks that an invalid --node-label-config (here
// a rule that sets a reserved label) disables the node labeler alone: the other
// controllers run, nodes are left alone, the error names the rule and the key in the log,
// in a Warning Event on the controller's own Pod and as
// app_controller_node_label_config_valid 0 on /metrics; in process and as the
// bin/app-controller binary, which keeps running.
func TestInvalidConfigDisablesNodeLabeler(t *testing.T) {
	config := writeConfig(t, `
rules:
- name: ok
  match: {providerIDPrefix: "kwok://"}
  labels: {it.example.com/a: "1"}
- name: roles
  match: {nameRegex: "nl-.*"}
  labels: {node-role.kubernetes.io/worker: ""}
`)
	want := `rules[1] (name "roles"): labels["node-role.kubernetes.io/worker"]: the prefix "node-role.kubernetes.io/" is reserved`
	kube := framework.Client(t)
	ctx := context.Background()

	t.Run("in process", func(t *testing.T) {
		ns := framework.Namespace(t)
		createNode(t, kube, "nl-invalid-config", map[string]string{pool: "blue"})
		// The controller's own Pod, as the downward API names it (POD_NAME,
		// POD_NAMESPACE): the Event about the disabled labeler goes there.
		pod, err := kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "app-controller-it"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "app-controller:it"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		metricsAddr := framework.FreeAddr(t)
		opts := controllermanager.NewOptions()
		opts.NodeLabelConfig = config
		opts.PodName, opts.PodNamespace = pod.Name, ns
		opts.MetricsBindAddress = metricsAddr
		opts.ResyncPeriod = 10 * time.Second
		opts.ShutdownTimeout = 5 * time.Second
		framework.StartManager(t, framework.Config(t), opts)

		// The ingress controller runs.
		waitIngressControllerRuns(t, kube, ns)

		event := framework.WaitEvent(t, kube, ns, "Pod", pod.Name, "Warning "+controllermanager.ReasonControllerDisabled+" ", converge)
		for _, part := range []string{"The nodelabel controller is disabled, the others run", config, want} {
			if !strings.Contains(event, part) {
				t.Errorf("Event %q does not contain %q", event, part)
			}
		}

		framework.Eventually(t, converge, func() (bool, error) {
			resp, err := http.Get("http://" + metricsAddr + "/metrics")
			if err != nil {
				return false, nil
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			return err == nil && strings.Contains(string(body), "\napp_controller_node_label_config_valid 0\n"), nil
		})

		if node := getNode(t, kube, "nl-invalid-config"); node.Labels["it.example.com/a"] != "" || len(labelManagers(node, "it.example.com/a")) > 0 {
			t.Errorf("a disabled labeler labelled the node: %v", node.Labels)
		}
	})

	t.Run("binary", func(t *testing.T) {
		bin := framework.BuildBinary(t, "app-controller")
		ctx, cancel := context.WithTimeout(context.Background(), converge)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "--kubeconfig", framework.Cluster().Kubeconfig, "--node-label-config", config,
			"--health-probe-bind-address", "0", "--metrics-bind-address", "0", "--controllers", "ingress,nodelabel")
		var out framework.LockedBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		line := "Controller disabled: its configuration is invalid; the other controllers run"
		framework.Eventually(t, converge, func() (bool, error) {
			select {
			case err := <-exited:
				how := "exit status 0"
				if err != nil {
					how = err.Error()
				}
				return false, fmt.Errorf("app-controller exited (%s) with an invalid node label config, want it to run the other controllers:\n%s", how, out.String())
			default:
			}
			return strings.Contains(out.String(), line), nil
		})
		// Still running a while later.
		select {
		case err := <-exited:
			t.Fatalf("app-controller exited (%v) after disabling the node labeler:\n%s", err, out.String())
		case <-time.After(3 * time.Second):
		}
		logged := out.String()
		if !strings.Contains(logged, strings.ReplaceAll(want, `"`, `\"`)) && !strings.Contains(logged, want) {
			t.Errorf("the log does not name the rule and key (%q):\n%s", want, logged)
		}
		cancel()
		<-exited //nolint:errcheck // how it ends once cancelled tells nothing: waited for so that nothing outlives the test
	})
}

// waitIngressControllerRuns creates a Service annotated ingress/http in ns and waits until
// the ingress controller gives it its Ingress: the manager is up and syncing.
func waitIngressControllerRuns(t *testing.T, kube kubernetes.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	if _, err := kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Annotations: map[string]string{"ingress/http": "true"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, converge, func() (bool, error) {
		_, err := kube.NetworkingV1().Ingresses(ns).Get(ctx, "probe", metav1.GetOptions{})
		return err == nil, nil
	})
}
