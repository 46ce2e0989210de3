package rollout_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/test/e2e/realnode"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// versionedConfig: an App with spec.rollout.versionedConfig whose agnhost reads its
// subcommand from the ConfigMap conf (env MODE, and the file /etc/conf/mode): mode
// "crash" is a bad value the app exits on. The change aborts the canary on its own; a
// pod that mounts conf itself (control) reads the new value once the kubelet has synced
// it, while the stable pods still read the old one from their copy, never restarted.
func (e *env) versionedConfig(t *testing.T) {
	ctx := context.Background()
	cms := e.client.CoreV1().ConfigMaps(e.ns)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf"}, Data: map[string]string{"mode": "netexec"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	volume := corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}}
	control := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "control"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "pause", Image: e.agnhost, Args: []string{"pause"},
				VolumeMounts: []corev1.VolumeMount{{Name: "conf", MountPath: "/etc/conf"}}}},
			Volumes: []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &volume}}},
		},
	}
	if _, err := e.client.CoreV1().Pods(e.ns).Create(ctx, control, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	app := e.app("conf", 2, appv1.CanaryStep{SetWeight: ptr.To[int32](50)}, appv1.CanaryStep{Pause: &appv1.CanaryPause{}})
	app.Spec.Rollout.VersionedConfig = true
	d := app.Spec.DeploymentTemplate
	d.Args = []string{"$(MODE)", fmt.Sprintf("--http-port=%d", port)}
	d.Env = append(d.Env, corev1.EnvVar{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: volume.LocalObjectReference, Key: "mode"}}})
	d.Volumes = []appv1.Volume{{Name: "conf", ConfigMap: &volume}}
	d.VolumeMounts = []appv1.VolumeMount{{Name: "conf", MountPath: "/etc/conf"}}
	if _, err := e.apps.AppcontrollerV1().Apps(e.ns).Create(ctx, app, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitRollout(t, "conf", 3*time.Minute, "Ready and Healthy", func(a *appv1.App) bool {
		return ready(a) && a.Status.Rollout != nil && a.Status.Rollout.Phase == appv1.RolloutHealthy
	})
	stable := e.pods(t, "conf")
	if len(stable) != 2 {
		t.Fatalf("%d pods, want 2", len(stable))
	}
	for _, p := range stable {
		if v := p.Spec.Volumes[0].ConfigMap.Name; !strings.HasPrefix(v, "conf-") {
			t.Errorf("pod %s mounts ConfigMap %s, want its copy conf-HASH", p.Name, v)
		}
		if got := readMode(t, e.ns, p.Name); got != "netexec" {
			t.Errorf("pod %s reads mode %q", p.Name, got)
		}
	}
	t.Logf("conf: Ready, its 2 pods read ConfigMap %s (mode netexec)", stable[0].Spec.Volumes[0].ConfigMap.Name)

	changed := time.Now()
	if _, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf"}, Data: map[string]string{"mode": "crash"}},
		metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var aborted *appv1.App
	e.waitRollout(t, "conf", abortWithin, "aborted", func(a *appv1.App) bool {
		aborted = a
		return a.Status.Rollout != nil && a.Status.Rollout.Phase == appv1.RolloutAborted
	})
	t.Logf("conf, mode crash: aborted %.1fs after the change: %s", time.Since(changed).Seconds(), aborted.Status.Rollout.AbortMessage)
	if r := aborted.Status.Rollout.AbortReason; r != appv1.ReasonCrashLoopBackOff {
		t.Errorf("abort reason %s, want %s", r, appv1.ReasonCrashLoopBackOff)
	}

	// The kubelet syncs the ConfigMap into the pods that mount it itself (within its sync
	// period): then the stable pods, which mount their copy, still read netexec.
	framework.Eventually(t, 3*time.Minute, func() (bool, error) { return readMode(t, e.ns, "control") == "crash", nil })
	t.Logf("the control pod reads mode crash %.1fs after the change", time.Since(changed).Seconds())
	for _, p := range stable {
		now, err := e.client.CoreV1().Pods(e.ns).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("stable pod %s: %v", p.Name, err)
		}
		restarts := int32(0)
		for _, s := range now.Status.ContainerStatuses {
			restarts += s.RestartCount
		}
		got := readMode(t, e.ns, p.Name)
		if now.UID != p.UID || restarts != 0 || got != "netexec" {
			t.Errorf("stable pod %s: UID %s (was %s), %d restarts, reads mode %q; want the same pod, never restarted, reading netexec",
				p.Name, now.UID, p.UID, restarts, got)
		}
		t.Logf("stable pod %s: the same pod, %d restarts, reads mode %q", p.Name, restarts, got)
	}
	t.Logf("kubectl app status conf:\n%s", e.kubectlApp(t, "status", "conf"))

	// The ConfigMap fixed back: the stable's copy again, the rollout ends.
	if _, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf"}, Data: map[string]string{"mode": "netexec"}},
		metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitRollout(t, "conf", time.Minute, "Ready and Healthy again", func(a *appv1.App) bool {
		return ready(a) && a.Status.Rollout != nil && a.Status.Rollout.Phase == appv1.RolloutHealthy
	})
	if now := e.podNames(t, "conf", false); !equal(now, []string{stable[0].Name, stable[1].Name}) && !equal(now, []string{stable[1].Name, stable[0].Name}) {
		t.Errorf("stable pods %v, were %s and %s", now, stable[0].Name, stable[1].Name)
	}
}

// readMode returns what the pod reads in /etc/conf/mode (agnhost mounttest, through
// kubectl exec).
func readMode(t *testing.T, ns, pod string) string {
	t.Helper()
	out := realnode.Kubectl(t, "exec", "-n", ns, pod, "--", "/agnhost", "mounttest", "--file-content=/etc/conf/mode")
	_, content, ok := strings.Cut(out, `content of file "/etc/conf/mode": `)
	if !ok {
		t.Fatalf("kubectl exec %s -- /agnhost mounttest: %q", pod, out)
	}
	return strings.TrimSpace(content)
}
