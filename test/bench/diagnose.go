package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// maxDiagnosed is how many stuck Apps are described.
const maxDiagnosed = 10

// diagnose prints, for each stuck App (the first maxDiagnosed), its status, its children
// and their ReplicaSets and Pods, and the controller's log lines that name it.
func (e *env) diagnose(ctx context.Context, ns string, stuck []string, procs []*controllerProc) {
	e.printf("%d App(s) did not converge: %s\n", len(stuck), strings.Join(head(stuck, 50), " "))
	for _, p := range procs {
		if err := p.Exited(); err != nil {
			e.printf("%v\n", err)
		}
	}
	for _, name := range head(stuck, maxDiagnosed) {
		fmt.Fprintf(e.out, "--- App %s/%s\n", ns, name)
		app, err := e.admin.app.AppcontrollerV1().Apps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			fmt.Fprintf(e.out, "  get: %v\n", err)
			continue
		}
		fmt.Fprintf(e.out, "  generation %d, resourceVersion %s\n  status: %s\n", app.Generation, app.ResourceVersion, toJSON(app.Status))
		e.describeChildren(ctx, app)
		fmt.Fprintf(e.out, "  controller log lines naming %s:\n", name)
		for _, line := range e.logLines(ns, name, 40) {
			fmt.Fprintf(e.out, "    %s\n", line)
		}
	}
}

// describeChildren prints the App's Deployment, Service, ReplicaSets and Pods.
func (e *env) describeChildren(ctx context.Context, app *appv1.App) {
	ns := app.Namespace
	if t := app.Spec.DeploymentTemplate; t != nil {
		d, err := e.admin.kube.AppsV1().Deployments(ns).Get(ctx, t.Name, metav1.GetOptions{})
		if err != nil {
			fmt.Fprintf(e.out, "  Deployment %s: %v\n", t.Name, err)
		} else {
			fmt.Fprintf(e.out, "  Deployment %s: generation %d, owners %s, status %s\n", d.Name, d.Generation, toJSON(d.OwnerReferences), toJSON(d.Status))
		}
	}
	if t := app.Spec.ServiceTemplate; t != nil {
		s, err := e.admin.kube.CoreV1().Services(ns).Get(ctx, t.Name, metav1.GetOptions{})
		if err != nil {
			fmt.Fprintf(e.out, "  Service %s: %v\n", t.Name, err)
		} else {
			fmt.Fprintf(e.out, "  Service %s: clusterIP %s, owners %s\n", s.Name, s.Spec.ClusterIP, toJSON(s.OwnerReferences))
		}
	}
	selector := metav1.ListOptions{LabelSelector: appv1.InstanceLabel + "=" + app.Name}
	if rss, err := e.admin.kube.AppsV1().ReplicaSets(ns).List(ctx, selector); err != nil {
		fmt.Fprintf(e.out, "  ReplicaSets: %v\n", err)
	} else {
		for _, rs := range rss.Items {
			fmt.Fprintf(e.out, "  ReplicaSet %s: status %s\n", rs.Name, toJSON(rs.Status))
		}
	}
	if pods, err := e.admin.kube.CoreV1().Pods(ns).List(ctx, selector); err != nil {
		fmt.Fprintf(e.out, "  Pods: %v\n", err)
	} else {
		for _, p := range pods.Items {
			fmt.Fprintf(e.out, "  Pod %s: node %q, phase %s, conditions %s\n", p.Name, p.Spec.NodeName, p.Status.Phase, toJSON(p.Status.Conditions))
		}
	}
}

// logLines returns the last max lines of the controller logs that name ns/name (or the
// App's children).
func (e *env) logLines(ns, name string, maxLines int) []string {
	files, _ := filepath.Glob(filepath.Join(e.logDir, "*.log"))
	var lines []string
	needles := []string{ns + "/" + name + `"`, ns + "/" + name + "-", `"` + name + `"`}
	for _, f := range files {
		file, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(file)
		sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
		for sc.Scan() {
			for _, n := range needles {
				if strings.Contains(sc.Text(), n) {
					lines = append(lines, filepath.Base(f)+": "+sc.Text())
					break
				}
			}
		}
		file.Close()
	}
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	if len(lines) == 0 {
		lines = []string{"(none)"}
	}
	return lines
}

func head(s []string, n int) []string { return s[:min(n, len(s))] }

func toJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}
