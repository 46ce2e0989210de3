// Package install_test installs the controller with its Helm chart on a cluster whose node
// runs pods for real, as a platform team would, and runs the seed's Apps on it: two
// releases made with `make release` into the cluster's registry (signed, checked with
// sha256sum and cosign), `helm install` of the previous one from the registry, the
// controller's pods Ready through their probes, leader election from pods, /metrics
// through the metrics Service, the node labeler on the real node, the seed Apps serving
// HTTP through their Services, then a leader failover, a `helm upgrade` to the current
// release (CRD included, the Apps' children untouched), Secret-driven rollouts turned
// off, a container killed for memory and a `helm rollback` to the previous release.
package install_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/app-controller/app-controller/internal/localcluster"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	appclient "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
	"github.com/app-controller/app-controller/test/e2e/realnode"
	"github.com/app-controller/app-controller/test/integration/framework"
)

func TestMain(m *testing.M) { realnode.Main(m) }

const (
	release   = "app-controller"
	releaseNS = "app-controller-system"
	seedNS    = "tcs"
	// leaseDuration is the chart's default leaderElection.leaseDuration.
	leaseDuration = 15 * time.Second
	nodeLabel     = "node.example.com/runs"
)

// seedApps are the seed's example Apps, by file, and the children they name.
var seedApps = []struct {
	file, name, deployment, service string
	replicas                        int32
}{
	{"artifacts/example/test_app.yaml", "test-app", "app-deploy", "app-service", 2},
	{"artifacts/example/test_app_2.yaml", "test-app-2", "app-deploy-test", "app-service-test", 3},
}

func TestHelmInstallOnRealNode(t *testing.T) {
	ctx := context.Background()
	client := framework.Client(t)
	apps := framework.AppClient(t)
	registry := realnode.Registry(t)
	begin := time.Now()
	rel := makeReleases(t, registry)
	t.Logf("releases %s and %s made, pushed and checked in %.1fs", previousVersion, currentVersion, time.Since(begin).Seconds())

	// helm install, with node labeler rules for the real node.
	values := filepath.Join(t.TempDir(), "values.yaml")
	writeYAML(t, values, map[string]any{
		"nodeLabelRules": []any{map[string]any{
			"name":   "real-nodes",
			"match":  map[string]any{"nameRegex": "real-node-.*"},
			"labels": map[string]any{nodeLabel: "containers"},
		}},
	})
	// The previous release, as its notes say: the chart from the registry, its image
	// the release's own.
	begin = time.Now()
	realnode.Helm(t, "install", release, rel.chart(), "--version", rel.previous.chartVersion, "--plain-http",
		"-n", releaseNS, "--create-namespace", "-f", values, "--wait", "--timeout", "3m")
	t.Logf("helm install %s %s --version %s --wait: the controller's 2 pods Ready after %.1fs", release, rel.chart(), rel.previous.chartVersion, time.Since(begin).Seconds())
	checkCRDOf(t, rel.previous)

	pods := controllerPods(t, client)
	if len(pods) != 2 {
		t.Fatalf("controller pods: %d, want 2", len(pods))
	}
	for _, p := range pods {
		if !realnode.PodReady(&p) || p.Spec.NodeName != localcluster.RealNodeName {
			t.Fatalf("controller pod %s: ready %v on node %q, want Ready on %s", p.Name, realnode.PodReady(&p), p.Spec.NodeName, localcluster.RealNodeName)
		}
		if want := rel.repository + ":" + previousVersion; p.Spec.Containers[0].Image != want {
			t.Fatalf("controller pod %s runs %s, want the release's image %s", p.Name, p.Spec.Containers[0].Image, want)
		}
		t.Logf("controller pod %s Running and Ready on %s (probes through the kubelet), image %s", p.Name, p.Spec.NodeName, p.Spec.Containers[0].Image)
	}

	leader := waitLeader(t, client, "", time.Minute)
	t.Logf("Lease %s/app-controller held by pod %s", releaseNS, leader)

	proberNS := framework.Namespace(t)
	prober := realnode.NewProber(t, proberNS)

	// kubectl logs and exec reach the real node's containers through the kubelet.
	logs := realnode.Kubectl(t, "logs", "-n", releaseNS, leader)
	if !strings.Contains(logs, "Acquired the leader lease") {
		t.Fatalf("kubectl logs %s: no \"Acquired the leader lease\" in %d bytes", leader, len(logs))
	}
	t.Logf("kubectl logs %s: %s", leader, grepLine(logs, "Acquired the leader lease"))
	out := realnode.Kubectl(t, "exec", "-n", proberNS, "prober", "--", "/agnhost", "connect", "--timeout=5s", "10.96.0.1:443")
	t.Logf("kubectl exec prober -- /agnhost connect 10.96.0.1:443 (the apiserver through Service default/kubernetes): ok %q", strings.TrimSpace(out))
	// The pods reach nothing outside the node: a connection to the host's end of the node's
	// veth is dropped inside the node's namespace.
	node, err := client.CoreV1().Nodes().Get(ctx, localcluster.RealNodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hostEnd := hostEndOfVeth(t, node)
	if out, err := realnode.TryRun(filepath.Join(realnode.BinDir(t), "kubectl"), "exec", "-n", proberNS, "prober", "--", "/agnhost", "connect", "--timeout=2s", hostEnd+":22"); err == nil {
		t.Fatalf("a pod reached the host at %s:22: %s", hostEnd, out)
	} else {
		t.Logf("kubectl exec prober -- /agnhost connect %s:22 (the host's end of the node's veth): refused as it should: %s", hostEnd, strings.TrimSpace(out))
	}
	metricsSvc := serviceIP(t, client, releaseNS, release+"-metrics")
	body := getFromPod(t, prober, metricsSvc, 8080, "/metrics", "")
	if info := grepLine(body, "app_controller_build_info{"); !strings.Contains(info, `version="`+previousVersion+`"`) {
		t.Fatalf("GET http://%s:8080/metrics from a pod: build info %q, want version %s", metricsSvc, info, previousVersion)
	}
	t.Logf("GET http://%s:8080/metrics (Service %s-metrics) from a pod: %d bytes, %s", metricsSvc, release, len(body), grepLine(body, "app_controller_build_info{"))

	framework.Eventually(t, time.Minute, func() (bool, error) {
		node, err := client.CoreV1().Nodes().Get(ctx, localcluster.RealNodeName, metav1.GetOptions{})
		return err == nil && node.Labels[nodeLabel] == "containers", nil
	})
	t.Logf("node %s labelled %s=containers by the chart's rule", localcluster.RealNodeName, nodeLabel)

	// The seed's Apps, with agnhost netexec in place of nginx and tomcat.
	realnode.Kubectl(t, "create", "namespace", seedNS)
	for _, app := range seedApps {
		begin := time.Now()
		realnode.RunStdin(t, seedManifest(t, app.file, realnode.Agnhost(t)), filepath.Join(realnode.BinDir(t), "kubectl"), "apply", "-f", "-")
		waitAppReady(t, apps, seedNS, app.name, 3*time.Minute)
		t.Logf("App %s/%s (%d replicas) Ready %.1fs after kubectl apply", seedNS, app.name, app.replicas, time.Since(begin).Seconds())
	}
	for _, app := range seedApps {
		ip := serviceIP(t, client, seedNS, app.service)
		body := getFromPod(t, prober, ip, appPort, "/hostname", app.deployment+"-")
		t.Logf("GET http://%s:%d/hostname (Service %s, through kube-proxy) from a pod: %q", ip, appPort, app.service, body)
	}
	realnode.Kubectl(t, "annotate", "service", "-n", seedNS, seedApps[0].service, "ingress/http=true")
	framework.Eventually(t, 30*time.Second, func() (bool, error) {
		ing, err := client.NetworkingV1().Ingresses(seedNS).Get(ctx, seedApps[0].service, metav1.GetOptions{})
		return err == nil && len(ing.OwnerReferences) == 1 && ing.OwnerReferences[0].Name == seedApps[0].service, nil
	})
	t.Logf("Service %s annotated ingress/http: Ingress %s owned by it", seedApps[0].service, seedApps[0].service)

	// The subtests, in order: each starts from the state the one before it ends in
	// (releaseState), and fails at once, naming that one, when the release is not in it.
	prev, prevPassed := "the install (the steps before the subtests)", true
	for _, s := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"failover", func(t *testing.T) { testFailover(t, client, apps, prober) }},
		{"upgrade", func(t *testing.T) { testUpgrade(t, client, apps, rel) }},
		{"secrets-off", func(t *testing.T) { testSecretsOff(t, client, apps, rel) }},
		{"oomkilled-rollback", func(t *testing.T) { testOOMKilledRollback(t, client, apps, rel) }},
		{"apiserver-away", func(t *testing.T) { testAPIServerAway(t, client, apps) }},
	} {
		passed := t.Run(s.name, func(t *testing.T) {
			requireRelease(t, client, apps, prev, prevPassed)
			s.run(t)
		})
		prev, prevPassed = s.name, passed
	}
}

// startGrace bounds how long a subtest waits for the state it starts from. The subtest
// before it waited for that state before it ended, so only a readiness probe that
// flaps on a busy machine is waited out here.
const startGrace = 30 * time.Second

// requireRelease fails the subtest at once unless the release reaches, within
// startGrace, the state every subtest starts from (releaseState), saying that prev, the
// subtest before it, left it otherwise, and whether prev failed.
func requireRelease(t *testing.T, client kubernetes.Interface, apps appclient.Interface, prev string, prevPassed bool) {
	t.Helper()
	var problem string
	if pollUntil(startGrace, func() bool {
		problem = releaseState(client, apps)
		return problem == ""
	}) == nil {
		return
	}
	verdict := "passed, yet left it so"
	if !prevPassed {
		verdict = "failed and left it so (its failure is above)"
	}
	t.Fatalf("not started: the release is not in the state this subtest starts from (2 controller pods Ready and none terminating, one of them leading, every App in %s Ready) within %s: %s. The subtest before it, %s, %s",
		seedNS, startGrace, problem, prev, verdict)
}

// releaseState returns what keeps the release from the state each subtest starts from
// and ends in, "" when it is in it: the controller's 2 pods Ready and none terminating,
// the Lease held by one of them, every App in the seed namespace Ready at its
// generation.
func releaseState(client kubernetes.Interface, apps appclient.Interface) string {
	ctx := context.Background()
	pods, err := client.CoreV1().Pods(releaseNS).List(ctx, metav1.ListOptions{LabelSelector: controllerSelector})
	if err != nil {
		return fmt.Sprintf("listing the controller's pods: %v", err)
	}
	var problems []string
	live := map[string]bool{}
	ready := 0
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp == nil {
			live[p.Name] = true
			if realnode.PodReady(p) {
				ready++
			}
		}
	}
	if len(pods.Items) != 2 || ready != 2 {
		problems = append(problems, fmt.Sprintf("%d controller pods, %d of them Ready: [%s]", len(pods.Items), ready, describePods(pods.Items)))
	}
	lease, err := client.CoordinationV1().Leases(releaseNS).Get(ctx, "app-controller", metav1.GetOptions{})
	switch {
	case err != nil:
		problems = append(problems, fmt.Sprintf("getting the Lease: %v", err))
	case lease.Spec.HolderIdentity == nil:
		problems = append(problems, "the Lease has no holder")
	default:
		if pod, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_"); !live[pod] {
			problems = append(problems, fmt.Sprintf("the Lease is held by %q, not by a live controller pod", *lease.Spec.HolderIdentity))
		}
	}
	list, err := apps.AppcontrollerV1().Apps(seedNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return strings.Join(append(problems, fmt.Sprintf("listing the Apps: %v", err)), "; ")
	}
	for i := range list.Items {
		if a := &list.Items[i]; !appReady(a) || a.Status.ObservedGeneration != a.Generation {
			problems = append(problems, fmt.Sprintf("App %s not Ready at generation %d (observed %d, Ready: %s)", a.Name, a.Generation, a.Status.ObservedGeneration, readyMessage(a)))
		}
	}
	return strings.Join(problems, "; ")
}

// outageEnv sets how long testAPIServerAway keeps kube-apiserver away (a Go duration):
// by default outageDefault, longer than the lease's renew deadline (10 s) plus the kubelet's
// first restart delay (10 s), so that the leader steps down, exits, and its next process
// starts while the API server is still away. APP_CONTROLLER_E2E_OUTAGE=3m is the outage
// of issue 24, run by hand (it adds its length to the end-to-end tier).
const (
	outageEnv     = "APP_CONTROLLER_E2E_OUTAGE"
	outageDefault = 45 * time.Second
)

// testAPIServerAway freezes kube-apiserver (SIGSTOP: connections hang, nothing answers)
// for longer than the leader's renew deadline, under the chart's probes. The leader steps
// down and exits, as kube-controller-manager does; the kubelet restarts it once, and that
// process waits for the API server instead of exiting again: no container restarts more
// than once, none is left in CrashLoopBackOff, both pods are Ready again, one of them
// leads, and Apps created and changed after the outage converge.
func testAPIServerAway(t *testing.T, client kubernetes.Interface, apps appclient.Interface) {
	ctx := context.Background()
	outage := outageDefault
	if v := os.Getenv(outageEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", outageEnv, v, err)
		}
		outage = d
	}
	leader := waitLeader(t, client, "", time.Minute)
	restarts := map[string]int32{}
	for _, p := range controllerPods(t, client) {
		restarts[p.Name] = p.Status.ContainerStatuses[0].RestartCount
	}

	cluster := framework.Cluster()
	if err := cluster.Pause(localcluster.APIServer); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = cluster.Resume(localcluster.APIServer)
		}
	})
	away := time.Now()
	time.Sleep(outage)
	if err := cluster.Resume(localcluster.APIServer); err != nil {
		t.Fatal(err)
	}
	resumed = true
	back := time.Now()
	t.Logf("kube-apiserver frozen (SIGSTOP) for %.1fs, leader before: %s", back.Sub(away).Seconds(), leader)

	// The kubelet could not report the pods' status while the API server was away: wait
	// until it reports the leader's restart (a new container, started after the freeze).
	var pods []corev1.Pod
	framework.Eventually(t, 2*time.Minute, func() (bool, error) {
		pods = controllerPods(t, client)
		for _, p := range pods {
			if p.Name != leader {
				continue
			}
			s := p.Status.ContainerStatuses[0]
			return s.RestartCount > restarts[leader] && s.State.Running != nil && s.State.Running.StartedAt.After(away) && realnode.PodReady(&p), nil
		}
		return false, nil
	})
	t.Logf("the leader %s restarted and is Ready again %.1fs after kube-apiserver came back", leader, time.Since(back).Seconds())
	waitControllerPodsReady(t, client, 2, 2*time.Minute)
	next := waitLeader(t, client, "", time.Minute)
	t.Logf("%s leads", next)
	for _, p := range controllerPods(t, client) {
		s := p.Status.ContainerStatuses[0]
		before, known := restarts[p.Name]
		switch n := s.RestartCount - before; {
		case !known:
			t.Errorf("pod %s is new: the outage replaced a controller pod", p.Name)
		case n > 1:
			t.Errorf("pod %s: container restarted %d times during the outage, want at most once (a crash loop)", p.Name, n)
		case n == 1 && p.Name != leader:
			t.Errorf("pod %s, the standby, restarted: only a leader that lost its lease exits", p.Name)
		case n == 1:
			prev := realnode.Kubectl(t, "logs", "-n", releaseNS, p.Name, "--previous")
			if !strings.Contains(prev, "leader election lost") {
				t.Errorf("pod %s: the previous process's log does not say it lost the lease; it ends with: %s", p.Name, lastLine(prev))
			}
			t.Logf("pod %s (the leader) restarted once, exit code %d; its previous process ended with: %s", p.Name, s.LastTerminationState.Terminated.ExitCode, lastLine(prev))
		default:
			t.Logf("pod %s (standby): no restart", p.Name)
		}
		if w := s.State.Waiting; w != nil {
			t.Errorf("pod %s: container waiting (%s: %s)", p.Name, w.Reason, w.Message)
		}
	}

	realnode.Kubectl(t, "apply", "-f", writeApp(t, "after-outage", realnode.Agnhost(t)))
	realnode.Kubectl(t, "patch", "app", "-n", seedNS, seedApps[0].name, "--type=merge", "-p", `{"metadata":{"annotations":{"kubernetes.io/change-cause":"after the outage"}},"spec":{"deploymentTemplate":{"args":["netexec","--http-port=8080"]}}}`)
	waitAppReady(t, apps, seedNS, "after-outage", 2*time.Minute)
	waitAppReady(t, apps, seedNS, seedApps[0].name, 2*time.Minute)
	d, err := client.AppsV1().Deployments(seedNS).Get(ctx, seedApps[0].deployment, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(got, "--http-port=8080") {
		t.Errorf("Deployment %s args %v after the change, want --http-port=8080", d.Name, got)
	}
	t.Logf("App after-outage created and App %s changed after the outage: both Ready %.1fs after kube-apiserver came back", seedApps[0].name, time.Since(back).Seconds())
}

// testFailover deletes the leader's pod while a ResourceQuota of one pod in the release
// namespace keeps its replacement from being created, so that only the standby can lead:
// the standby takes the Lease within the lease duration, and an App created meanwhile
// converges with the standby alone. Then the quota goes and the release is back to its 2
// controller pods.
func testFailover(t *testing.T, client kubernetes.Interface, apps appclient.Interface, prober *realnode.Prober) {
	leader := waitLeader(t, client, "", time.Minute)
	var standby string
	var rs *metav1.OwnerReference
	for _, p := range controllerPods(t, client) {
		if p.Name != leader {
			standby, rs = p.Name, metav1.GetControllerOf(&p)
		}
	}
	if rs == nil || rs.Kind != "ReplicaSet" {
		t.Fatalf("the standby pod %s has no ReplicaSet as its controller: %+v", standby, rs)
	}
	realnode.Kubectl(t, "create", "quota", "failover", "-n", releaseNS, "--hard=pods=1")
	quota := true
	removeQuota := func() {
		if quota {
			realnode.Kubectl(t, "delete", "quota", "failover", "-n", releaseNS)
			quota = false
		}
	}
	defer func() {
		// After a failure below: the quota goes, and the ReplicaSet is asked to create
		// the missing pod, for the subtests after this one (they check they have it).
		if quota {
			removeQuota()
			framework.NudgeReplicaSets(t, client, releaseNS, controllerSelector, 0, func() bool { return true })
		}
	}()
	// The quota admission enforces a quota only once its controller has written the
	// quota's status (a quota without one admits every pod).
	framework.Eventually(t, time.Minute, func() (bool, error) {
		q, err := client.CoreV1().ResourceQuotas(releaseNS).Get(context.Background(), "failover", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		_, hard := q.Status.Hard[corev1.ResourcePods]
		_, used := q.Status.Used[corev1.ResourcePods]
		return hard && used, nil
	})
	begin := time.Now()
	realnode.Kubectl(t, "delete", "pod", "-n", releaseNS, leader, "--wait=false")
	realnode.Kubectl(t, "apply", "-f", writeApp(t, "during-failover", realnode.Agnhost(t)))
	next := waitLeader(t, client, leader, leaseDuration)
	took := time.Since(begin)
	if next != standby {
		t.Fatalf("pod %s leads after the delete, want the standby %s", next, standby)
	}
	t.Logf("leader pod %s deleted (a quota of 1 pod holds back its replacement): the standby %s leads %.1fs later (lease duration %s)", leader, next, took.Seconds(), leaseDuration)
	waitAppReady(t, apps, seedNS, "during-failover", 2*time.Minute)
	t.Logf("App during-failover, created right after the delete, Ready %.1fs after the delete", time.Since(begin).Seconds())
	getFromPod(t, prober, serviceIP(t, client, seedNS, "during-failover"), appPort, "/hostname", "during-failover-")
	if pods := controllerPods(t, client); len(pods) != 1 || pods[0].Name != standby {
		t.Fatalf("controller pods while the quota holds: [%s], want the standby %s alone", describePods(pods), standby)
	}
	refused := replicaFailure(t, client, rs.Name)

	// The quota goes; the ReplicaSet creates the missing pod at its next sync, which
	// its controller's backoff can put minutes away (framework.NudgeReplicaSets): the
	// test has it sync now.
	removeQuota()
	removed := time.Now()
	var replacement string
	writes := framework.NudgeReplicaSets(t, client, releaseNS, controllerSelector, time.Minute, func() bool {
		for _, p := range controllerPods(t, client) {
			if p.Name != standby {
				replacement = p.Name
				return true
			}
		}
		return false
	})
	waitControllerPodsReady(t, client, 2, 2*time.Minute)
	t.Logf("quota removed (ReplicaSet %s had been refused: %s); its replacement pod %s created after %d write(s) to the ReplicaSet, both pods Ready %.1fs after the removal",
		rs.Name, refused, replacement, writes, time.Since(removed).Seconds())
}

// replicaFailure says why the ReplicaSet name last failed to create a pod
// (framework.ReplicaFailure).
func replicaFailure(t testing.TB, client kubernetes.Interface, name string) string {
	t.Helper()
	rs, err := client.AppsV1().ReplicaSets(releaseNS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting ReplicaSet %s: %v", name, err)
	}
	return framework.ReplicaFailure(rs)
}

// testUpgrade upgrades the release from the previous release's chart to the current
// one's, both from the registry: the controller's pods roll one at a time to the current
// release's image, no App leaves Ready, the Apps' children are not written (the same UIDs
// and resourceVersions: no write at all), and the CRD is the current chart's.
func testUpgrade(t *testing.T, client kubernetes.Interface, apps appclient.Interface, rel *releases) {
	ctx := context.Background()
	before := childVersions(t, client)
	stop := make(chan struct{})
	observed := make(chan upgradeObservation, 1)
	go func() { observed <- observeUpgrade(ctx, client, apps, stop) }()

	begin := time.Now()
	realnode.Helm(t, "upgrade", release, rel.chart(), "--version", rel.current.chartVersion, "--plain-http", "-n", releaseNS,
		"--reset-then-reuse-values", "--wait", "--timeout", "3m")
	took := time.Since(begin)
	waitControllerPodsReady(t, client, 2, time.Minute)
	close(stop)
	o := <-observed
	checkImage(t, client, rel.repository+":"+currentVersion)
	t.Logf("helm upgrade %s --version %s (from %s) --wait: %.1fs; at most %d controller pods at once (terminating ones aside), never fewer than %d Ready; %d polls",
		rel.chart(), rel.current.chartVersion, rel.previous.chartVersion, took.Seconds(), o.maxPods, o.minReady, o.polls)
	// maxSurge 1, maxUnavailable 0: one new pod at a time, and never fewer Ready pods
	// than replicas.
	if o.maxPods > 3 {
		t.Errorf("up to %d controller pods at once: the rollout did not go one pod at a time (maxSurge 1)", o.maxPods)
	}
	if o.minReady < 2 {
		t.Errorf("a moment with %d Ready controller pods during the rollout (maxUnavailable 0): %s", o.minReady, o.atMinReady)
	}
	if len(o.notReady) > 0 {
		t.Errorf("Apps not Ready during the upgrade: %v", o.notReady)
	}
	checkCRDOf(t, rel.current)
	t.Logf("the App CRD upgraded with the release: labels of chart app-controller-%s, kept on uninstall", rel.current.chartVersion)
	leader := waitLeader(t, client, "", time.Minute)
	checkUntouched(t, "the upgrade", before, childVersions(t, client))
	t.Logf("new leader %s; the %d children of the seed Apps kept their UIDs and resourceVersions", leader, len(before))
}

// testSecretsOff turns Secret-driven rollouts off (configRollout.secrets=false): the
// controller runs with --config-rollout-secrets=false, its ClusterRole grants nothing on
// Secrets, the seed Apps' children are not written, and an App whose pods read a Secret
// converges: its pods start on the real node with the Secret in their environment.
func testSecretsOff(t *testing.T, client kubernetes.Interface, apps appclient.Interface, rel *releases) {
	ctx := context.Background()
	before := childVersions(t, client)
	begin := time.Now()
	realnode.Helm(t, "upgrade", release, rel.chart(), "--version", rel.current.chartVersion, "--plain-http", "-n", releaseNS,
		"--reuse-values", "--set", "configRollout.secrets=false", "--wait", "--timeout", "3m")
	waitControllerPodsReady(t, client, 2, time.Minute)
	role, err := client.RbacV1().ClusterRoles().Get(ctx, release, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range role.Rules {
		if slices.Contains(r.Resources, "secrets") {
			t.Fatalf("ClusterRole %s still grants %v on secrets", release, r.Verbs)
		}
	}
	for _, p := range controllerPods(t, client) {
		if !slices.Contains(p.Spec.Containers[0].Args, "--config-rollout-secrets=false") {
			t.Fatalf("controller pod %s runs without --config-rollout-secrets=false: %q", p.Name, p.Spec.Containers[0].Args)
		}
	}
	t.Logf("helm upgrade --set configRollout.secrets=false: %.1fs; the ClusterRole grants nothing on Secrets", time.Since(begin).Seconds())
	checkUntouched(t, "turning Secret rollouts off", before, childVersions(t, client))

	if _, err := client.CoreV1().Secrets(seedNS).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db"}, StringData: map[string]string{"password": "s3cret"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	app := appv1.App{
		TypeMeta:   metav1.TypeMeta{APIVersion: appv1.GroupVersion.String(), Kind: "App"},
		ObjectMeta: metav1.ObjectMeta{Name: "reads-secret", Namespace: seedNS},
		Spec: appv1.AppSpec{
			DeploymentTemplate: &appv1.DeploymentTemplate{Name: "reads-secret", Image: realnode.Agnhost(t), Args: []string{"netexec"},
				Env: []corev1.EnvVar{{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}}}},
			ServiceTemplate: &appv1.ServiceTemplate{Name: "reads-secret"},
		},
	}
	path := filepath.Join(t.TempDir(), "reads-secret.yaml")
	writeYAML(t, path, &app)
	begin = time.Now()
	realnode.Kubectl(t, "apply", "-f", path)
	waitAppReady(t, apps, seedNS, app.Name, 2*time.Minute)
	pods, err := client.CoreV1().Pods(seedNS).List(ctx, metav1.ListOptions{LabelSelector: appv1.InstanceLabel + "=" + app.Name})
	if err != nil {
		t.Fatal(err)
	}
	started := 0
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp == nil && realnode.PodReady(p) {
			started++
		}
	}
	if started == 0 {
		t.Fatal("App reads-secret is Ready but none of its pods runs")
	}
	t.Logf("App reads-secret (env PASSWORD from Secret db) Ready %.1fs after kubectl apply, %d pod(s) running on the real node", time.Since(begin).Seconds(), started)
}

// testOOMKilledRollback sets a memory limit the controller cannot live in (12Mi: the
// process starts, then outgrows it; at 8Mi runc's own init is killed before the
// controller runs): the kubelet kills its container (OOMKilled) and restarts it. Then
// `helm rollback` to the first revision, the previous release as installed: the
// controller gets its memory back and runs the previous release's image, the CRD goes
// back to the previous chart's, the seed Apps' children are not written, and an App
// created meanwhile converges.
func testOOMKilledRollback(t *testing.T, client kubernetes.Interface, apps appclient.Interface, rel *releases) {
	realnode.Helm(t, "upgrade", release, rel.chart(), "--version", rel.current.chartVersion, "--plain-http", "-n", releaseNS, "--reuse-values",
		"--set", "resources.requests.memory=12Mi", "--set", "resources.limits.memory=12Mi")
	begin := time.Now()
	var killed corev1.Pod
	var seen []string // the containers' states at the last poll, for a failure
	if err := pollUntil(3*time.Minute, func() bool {
		seen = seen[:0]
		for _, p := range controllerPods(t, client) {
			for _, s := range p.Status.ContainerStatuses {
				// The kubelet reports OOMKilled when the kernel's OOM killer acted in the
				// container's cgroup (exit code 137 when it killed the controller itself).
				if term := s.LastTerminationState.Terminated; term != nil && term.Reason == "OOMKilled" && s.RestartCount > 0 {
					killed = p
					return true
				}
				state, _ := json.Marshal(map[string]any{"state": s.State, "last": s.LastTerminationState, "restarts": s.RestartCount})
				seen = append(seen, p.Name+": "+string(state))
			}
		}
		return false
	}); err != nil {
		t.Fatalf("limit 12Mi: no controller container OOMKilled within 3 minutes; the containers: %s", strings.Join(seen, "; "))
	}
	s := killed.Status.ContainerStatuses[0]
	t.Logf("limit 12Mi: pod %s container %s OOMKilled (exit code %d) %.1fs after the upgrade, restarted by the kubelet %d time(s)",
		killed.Name, s.Name, s.LastTerminationState.Terminated.ExitCode, time.Since(begin).Seconds(), s.RestartCount)

	before := childVersions(t, client)
	realnode.Kubectl(t, "apply", "-f", writeApp(t, "during-oom", realnode.Agnhost(t)))
	begin = time.Now()
	realnode.Helm(t, "rollback", release, "1", "-n", releaseNS, "--wait", "--timeout", "3m")
	waitControllerPodsReady(t, client, 2, 2*time.Minute)
	waitAppReady(t, apps, seedNS, "during-oom", 2*time.Minute)
	t.Logf("helm rollback %s 1 (%s as installed): both pods Ready and App during-oom Ready %.1fs later", release, previousVersion, time.Since(begin).Seconds())
	checkImage(t, client, rel.repository+":"+previousVersion)
	checkCRDOf(t, rel.previous)
	t.Logf("the rollback took the App CRD back to the chart app-controller-%s's too", rel.previous.chartVersion)
	for _, app := range seedApps {
		waitAppReady(t, apps, seedNS, app.name, time.Minute)
	}
	checkUntouched(t, "the rollback", before, childVersions(t, client))
}

// checkImage fails the test unless every controller pod runs image.
func checkImage(t *testing.T, client kubernetes.Interface, image string) {
	t.Helper()
	for _, p := range controllerPods(t, client) {
		if got := p.Spec.Containers[0].Image; got != image {
			t.Errorf("pod %s runs %s, want %s", p.Name, got, image)
		}
	}
}

// checkUntouched fails the test for each child of the seed Apps whose UID or
// resourceVersion changed during what.
func checkUntouched(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for key, v := range before {
		if after[key] != v {
			t.Errorf("%s was written or replaced during %s: uid/resourceVersion %s -> %s", key, what, v, after[key])
		}
	}
}

// hostEndOfVeth returns the host's address on the node's veth pair: the node's
// InternalIP (10.201.N.2) with 1 as its last octet.
func hostEndOfVeth(t testing.TB, node *corev1.Node) string {
	t.Helper()
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address[:strings.LastIndex(a.Address, ".")] + ".1"
		}
	}
	t.Fatalf("node %s has no InternalIP", node.Name)
	return ""
}

// appPort is the port of an App's Service by default, and netexec's HTTP port.
const appPort = 8080

// getFromPod has the prober pod GET http://host:port/path until the body starts with
// prefix (within a minute), and returns the body.
func getFromPod(t testing.TB, prober *realnode.Prober, host string, port int, path, prefix string) string {
	t.Helper()
	var body string
	var err error
	if pollUntil(time.Minute, func() bool {
		body, err = prober.Get(host, port, path)
		return err == nil && strings.HasPrefix(body, prefix)
	}) != nil {
		t.Fatalf("GET http://%s:%d%s from a pod: want a body starting with %q within a minute; last: %q, %v", host, port, path, prefix, body, err)
	}
	return body
}

// upgradeObservation is what observeUpgrade saw.
type upgradeObservation struct {
	maxPods, minReady, polls int
	notReady                 []string
	// atMinReady describes the controller's pods when the fewest were Ready.
	atMinReady string
}

// observeUpgrade polls the controller's pods and the Apps until stop is closed.
func observeUpgrade(ctx context.Context, client kubernetes.Interface, apps appclient.Interface, stop <-chan struct{}) upgradeObservation {
	o := upgradeObservation{minReady: 1 << 30}
	seen := map[string]bool{}
	for {
		select {
		case <-stop:
			return o
		case <-time.After(200 * time.Millisecond):
		}
		o.polls++
		pods, err := client.CoreV1().Pods(releaseNS).List(ctx, metav1.ListOptions{LabelSelector: controllerSelector})
		if err == nil {
			live, ready := 0, 0
			for i := range pods.Items {
				if pods.Items[i].DeletionTimestamp != nil {
					continue // terminating: no longer counted by the Deployment
				}
				live++
				if realnode.PodReady(&pods.Items[i]) {
					ready++
				}
			}
			o.maxPods = max(o.maxPods, live)
			if ready < o.minReady {
				o.minReady = ready
				o.atMinReady = describePods(pods.Items)
			}
		}
		list, err := apps.AppcontrollerV1().Apps(seedNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, a := range list.Items {
			if !appReady(&a) && !seen[a.Name] {
				seen[a.Name] = true
				o.notReady = append(o.notReady, a.Name)
			}
		}
	}
}

// describePods says of each pod its name, image tag, phase, readiness (with the Ready
// condition's reason), restarts and whether it is terminating.
func describePods(pods []corev1.Pod) string {
	var out []string
	for i := range pods {
		p := &pods[i]
		image := p.Spec.Containers[0].Image
		desc := fmt.Sprintf("%s (%s, %s, ready=%t", p.Name, image[strings.LastIndex(image, ":")+1:], p.Status.Phase, realnode.PodReady(p))
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Reason != "" {
				desc += " " + c.Reason
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			desc += fmt.Sprintf(", restarts=%d", cs.RestartCount)
		}
		if p.DeletionTimestamp != nil {
			desc += ", terminating"
		}
		out = append(out, desc+")")
	}
	return strings.Join(out, "; ")
}

const controllerSelector = "app.kubernetes.io/name=app-controller"

func controllerPods(t testing.TB, client kubernetes.Interface) []corev1.Pod {
	t.Helper()
	pods, err := client.CoreV1().Pods(releaseNS).List(context.Background(), metav1.ListOptions{LabelSelector: controllerSelector})
	if err != nil {
		t.Fatalf("listing the controller's pods: %v", err)
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live
}

// waitControllerPodsReady waits until the controller has n pods, all Ready and none
// terminating, and otherwise fails the test saying what its pods were.
func waitControllerPodsReady(t testing.TB, client kubernetes.Interface, n int, timeout time.Duration) {
	t.Helper()
	var last []corev1.Pod
	err := pollUntil(timeout, func() bool {
		pods, err := client.CoreV1().Pods(releaseNS).List(context.Background(), metav1.ListOptions{LabelSelector: controllerSelector})
		if err != nil {
			return false
		}
		last = pods.Items
		if len(pods.Items) != n {
			return false
		}
		for i := range pods.Items {
			if !realnode.PodReady(&pods.Items[i]) || pods.Items[i].DeletionTimestamp != nil {
				return false
			}
		}
		return true
	})
	if err != nil {
		t.Fatalf("the controller's pods not %d Ready (none terminating) within %s: [%s]", n, timeout, describePods(last))
	}
}

// waitLeader waits until the Lease is held by a live controller pod other than not, and
// returns that pod's name.
func waitLeader(t testing.TB, client kubernetes.Interface, not string, timeout time.Duration) string {
	t.Helper()
	var leader string
	framework.Eventually(t, timeout, func() (bool, error) {
		lease, err := client.CoordinationV1().Leases(releaseNS).Get(context.Background(), "app-controller", metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil {
			return false, nil
		}
		pod, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
		if pod == not {
			return false, nil
		}
		for _, p := range controllerPods(t, client) {
			if p.Name == pod {
				leader = pod
				return true, nil
			}
		}
		return false, nil
	})
	return leader
}

// childVersions returns "UID/resourceVersion" of each child of the seed Apps.
func childVersions(t testing.TB, client kubernetes.Interface) map[string]string {
	t.Helper()
	ctx := context.Background()
	versions := map[string]string{}
	for _, app := range seedApps {
		d, err := client.AppsV1().Deployments(seedNS).Get(ctx, app.deployment, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s, err := client.CoreV1().Services(seedNS).Get(ctx, app.service, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		versions["Deployment "+d.Name] = string(d.UID) + "/" + d.ResourceVersion
		versions["Service "+s.Name] = string(s.UID) + "/" + s.ResourceVersion
	}
	return versions
}

func waitAppReady(t testing.TB, apps appclient.Interface, ns, name string, timeout time.Duration) {
	t.Helper()
	var last string
	err := pollUntil(timeout, func() bool {
		a, err := apps.AppcontrollerV1().Apps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false
		}
		last = readyMessage(a)
		return appReady(a) && a.Status.ObservedGeneration == a.Generation
	})
	if err != nil {
		t.Fatalf("App %s/%s not Ready within %s (Ready: %s)", ns, name, timeout, last)
	}
}

func pollUntil(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

func appReady(a *appv1.App) bool {
	for _, c := range a.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

func readyMessage(a *appv1.App) string {
	for _, c := range a.Status.Conditions {
		if c.Type == "Ready" {
			return fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
		}
	}
	return "no Ready condition"
}

func serviceIP(t testing.TB, client kubernetes.Interface, ns, name string) string {
	t.Helper()
	svc, err := client.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting Service %s/%s: %v", ns, name, err)
	}
	return svc.Spec.ClusterIP
}

// seedManifest returns the seed's example App of file with its image swapped for agnhost
// netexec serving HTTP on port 80 (nginx and tomcat cannot be pulled on this machine).
func seedManifest(t testing.TB, file, agnhost string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(realnode.Root(t), file))
	if err != nil {
		t.Fatal(err)
	}
	var app appv1.App
	if err := yaml.UnmarshalStrict(data, &app); err != nil {
		t.Fatalf("reading %s: %v", file, err)
	}
	app.Spec.DeploymentTemplate.Image = agnhost
	app.Spec.DeploymentTemplate.Args = []string{"netexec"}
	out, err := yaml.Marshal(&app)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// writeApp writes a one-replica App of agnhost netexec named name in the seed namespace to
// a file and returns its path.
func writeApp(t testing.TB, name, agnhost string) string {
	t.Helper()
	app := appv1.App{
		TypeMeta:   metav1.TypeMeta{APIVersion: appv1.GroupVersion.String(), Kind: "App"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: seedNS},
		Spec: appv1.AppSpec{
			DeploymentTemplate: &appv1.DeploymentTemplate{Name: name, Image: agnhost, Args: []string{"netexec"}},
			ServiceTemplate:    &appv1.ServiceTemplate{Name: name},
		},
	}
	path := filepath.Join(t.TempDir(), name+".yaml")
	writeYAML(t, path, &app)
	return path
}

func writeYAML(t testing.TB, path string, v any) {
	t.Helper()
	data, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func grepLine(s, substr string) string {
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, substr) {
			return line
		}
	}
	return ""
}
