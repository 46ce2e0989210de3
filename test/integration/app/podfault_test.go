package app

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller/controllertest"
)

// faultAnnotation prefixes the pod annotations that kwok's app-controller-pod-fault
// stage (hack/kwok/pod-fault.yaml) turns into container states.
const faultAnnotation = "fault.kwok.appcontroller.k8s.io/"

// TestPodFaultsFromKwokStages: kwok, driven by the project's fault stage, makes the pods
// of Apps report what a kubelet reports of an image that cannot be pulled, a missing
// ConfigMap key, a crash loop and an OOM kill (the faults set by the Apps' pod
// annotations). Each App's Ready condition names its fault with pod and container, and
// each App is Ready again once the fault goes (the annotations removed: a new pod
// template, which kwok's pod-ready stage makes ready).
func TestPodFaultsFromKwokStages(t *testing.T) {
	c, ns := eventDriven(t)
	ctx := context.Background()

	faults := []struct {
		name        string
		annotations map[string]string
		reason      string
		message     string // Ready's message, after `Pod "<pod>" container "<container>" `
		kstatus     kstatus.Status
	}{{
		name: "pull",
		annotations: map[string]string{
			"waiting-reason": "ImagePullBackOff",
			"message":        `Back-off pulling image "registry.example/nope:1": ErrImagePull: failed to pull and unpack image "registry.example/nope:1": not found`,
		},
		reason:  appv1.ReasonImagePullFailed,
		message: `cannot pull its image: failed to pull and unpack image "registry.example/nope:1": not found`,
		kstatus: kstatus.InProgressStatus,
	}, {
		name: "config",
		annotations: map[string]string{
			"waiting-reason": "CreateContainerConfigError",
			"message":        `couldn't find key url in ConfigMap ` + "NS/db",
		},
		reason:  appv1.ReasonContainerConfigError,
		message: `cannot be created: CreateContainerConfigError: couldn't find key url in ConfigMap NS/db`,
		kstatus: kstatus.InProgressStatus,
	}, {
		name: "crash",
		annotations: map[string]string{
			"waiting-reason": "CrashLoopBackOff",
			"message":        "back-off 40s restarting failed container",
			"restarts":       "3",
			"exit-code":      "2",
		},
		reason:  appv1.ReasonCrashLoopBackOff,
		message: "keeps exiting: exit code 2 (Error), restarted 3 times",
		// 3 restarts, but kwok's pods have no real start time: the minute since the pod
		// started has not passed yet, so no Stalled.
		kstatus: kstatus.InProgressStatus,
	}, {
		name: "oom",
		annotations: map[string]string{
			"waiting-reason": "CrashLoopBackOff",
			"message":        "back-off 10s restarting failed container",
			"restarts":       "1",
			"exit-code":      "137",
			"last-reason":    "OOMKilled",
		},
		reason:  appv1.ReasonOOMKilled,
		message: "was killed for using more memory than its limit (OOMKilled, exit code 137), restarted once",
		kstatus: kstatus.InProgressStatus,
	}}
	for _, f := range faults {
		app := newApp(ns, f.name, "nginx", 1)
		app.Spec.DeploymentTemplate.PodAnnotations = map[string]string{}
		for k, v := range f.annotations {
			app.Spec.DeploymentTemplate.PodAnnotations[faultAnnotation+k] = strings.ReplaceAll(v, "NS/", ns+"/")
		}
		c.Create(t, app)
	}
	for _, f := range faults {
		got := c.WaitCondition(t, ns, f.name, appv1.ConditionReady, "False/"+f.reason)
		msg := conditionMessage(got, appv1.ConditionReady)
		wantTail := `container "` + appv1.ContainerName + `" ` + strings.ReplaceAll(f.message, "NS/", ns+"/")
		if !strings.HasPrefix(msg, `Pod "`+f.name+"-") || !strings.HasSuffix(msg, wantTail) {
			t.Errorf("App %s: Ready message %q, want `Pod \"%s-...\" %s`", f.name, msg, f.name, wantTail)
		}
		if ks := controllertest.KStatus(t, got); ks != f.kstatus {
			t.Errorf("App %s: kstatus %s, want %s", f.name, ks, f.kstatus)
		}
		t.Logf("%s: Ready False/%s: %s", f.name, f.reason, msg)
	}
	// The fix: no fault annotations, a new pod template.
	for _, f := range faults {
		if _, err := c.App.AppcontrollerV1().Apps(ns).Patch(ctx, f.name, types.MergePatchType,
			[]byte(`{"spec":{"deploymentTemplate":{"podAnnotations":null}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatalf("fixing App %s: %v", f.name, err)
		}
	}
	for _, f := range faults {
		got := c.WaitReady(t, ns, f.name)
		if ks := controllertest.KStatus(t, got); ks != kstatus.CurrentStatus {
			t.Errorf("App %s fixed: kstatus %s, want Current", f.name, ks)
		}
	}
}
