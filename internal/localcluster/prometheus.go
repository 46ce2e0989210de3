package localcluster

import (
	"fmt"
	"strings"
)

// prometheusConfig scrapes, every 2 s, every running pod of the cluster annotated
// prometheus.io/scrape: "true", at the port of prometheus.io/port (else the pod's
// declared ports) and the path of prometheus.io/path (else /metrics); each series gets
// the labels namespace and pod, and each of the pod's labels as a label (its name with
// every character but letters, digits and _ as _: app_kubernetes_io_instance,
// appcontroller_k8s_io_track, ...), so a query can tell an App's canary pods from its
// stable ones. Debian's Prometheus has no kubernetes_sd_configs: the pods come from
// `demoapp pods-sd` beside it in its pod (http_sd_configs, every 2 s), with the labels
// kubernetes_sd_configs' role pod gives them, so this relabelling is kubernetes_sd's.
// %s is where prometheusReadyOnly goes, if wanted.
const prometheusConfig = `global:
  scrape_interval: 2s
  scrape_timeout: 2s
  evaluation_interval: 2s
scrape_configs:
- job_name: kubernetes-pods
  http_sd_configs:
  - url: http://127.0.0.1:9091/
    refresh_interval: 2s
  relabel_configs:
  - source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_scrape]
    regex: "true"
    action: keep
  - source_labels: [__meta_kubernetes_pod_phase]
    regex: Running
    action: keep
%s  - source_labels: [__address__, __meta_kubernetes_pod_annotation_prometheus_io_port]
    regex: '([^:]+)(?::\d+)?;(\d+)'
    replacement: '$1:$2'
    target_label: __address__
  - source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_path]
    regex: '(.+)'
    target_label: __metrics_path__
  - action: labelmap
    regex: __meta_kubernetes_pod_label_(.+)
  - source_labels: [__meta_kubernetes_namespace]
    target_label: namespace
  - source_labels: [__meta_kubernetes_pod_name]
    target_label: pod
`

// prometheusManifest runs Prometheus (image %[2]s) in namespace %[1]s: its service
// account with the right to list and watch the cluster's pods, its configuration
// (%[3]s, indented), the pod (Prometheus, and the discovery of the pods, demoapp pods-sd
// of image %[4]s, on the pod's loopback; %[5]s its priority class line, if any) and the
// Service prometheus, port 9090.
const prometheusManifest = `apiVersion: v1
kind: ServiceAccount
metadata: {name: prometheus, namespace: %[1]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: prometheus-%[1]s}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: prometheus-%[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: prometheus-%[1]s}
subjects: [{kind: ServiceAccount, name: prometheus, namespace: %[1]s}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: prometheus, namespace: %[1]s}
data:
  prometheus.yml: |
%[3]s
---
apiVersion: v1
kind: Service
metadata: {name: prometheus, namespace: %[1]s}
spec:
  selector: {app: prometheus}
  ports:
  - {name: web, port: 9090, targetPort: web}
---
apiVersion: v1
kind: Pod
metadata:
  name: prometheus
  namespace: %[1]s
  labels: {app: prometheus}
spec:
  serviceAccountName: prometheus
  terminationGracePeriodSeconds: 0%[5]s
  containers:
  - name: prometheus
    image: %[2]s
    args:
    - --config.file=/etc/prometheus/prometheus.yml
    - --storage.tsdb.path=/prometheus
    - --storage.tsdb.retention.time=1h
    - --web.listen-address=:9090
    ports:
    - {name: web, containerPort: 9090}
    readinessProbe:
      httpGet: {path: /-/ready, port: web}
      periodSeconds: 1
    volumeMounts:
    - {name: config, mountPath: /etc/prometheus}
    - {name: data, mountPath: /prometheus}
  - name: pods-sd
    image: %[4]s
    args: [pods-sd, --listen=127.0.0.1:9091]
  volumes:
  - name: config
    configMap: {name: prometheus}
  - name: data
    emptyDir: {}
`

// prometheusReadyOnly is the relabelling that keeps the Ready pods alone
// (PrometheusOptions.ReadyOnly).
const prometheusReadyOnly = `  - source_labels: [__meta_kubernetes_pod_ready]
    regex: "true"
    action: keep
`

// PrometheusOptions shape PrometheusManifest's Prometheus.
type PrometheusOptions struct {
	// ReadyOnly scrapes a pod only while it is Ready: a pod that runs but does not
	// serve yet (or any more) has no up = 0 series. A check of "the pods can be
	// scraped" then judges the pods that serve, not one still starting on a busy node;
	// a check of the pods' own error counts wants the pods that fail their readiness
	// too (the default).
	ReadyOnly bool
	// PriorityClassName is the Prometheus pod's: system-cluster-critical keeps the
	// kubelet from evicting it under node pressure (a critical pod is never evicted;
	// the soak's node-pressure fault is for the Apps' pods, not for what measures them).
	PriorityClassName string
}

// PrometheusManifest is the manifest of a Prometheus 2.42 (PrometheusImage, from
// registry) in namespace, as the end-to-end tests and the soak run it: the pod
// prometheus beside `demoapp pods-sd` (DemoappImage), the Service prometheus (port
// 9090), its service account with the right to watch the cluster's pods (a ClusterRole
// and ClusterRoleBinding named prometheus-NAMESPACE) and prometheusConfig: every pod
// annotated prometheus.io/scrape: "true" scraped every 2 s (job kubernetes-pods).
func PrometheusManifest(namespace, registry string, o PrometheusOptions) []byte {
	relabel := ""
	if o.ReadyOnly {
		relabel = prometheusReadyOnly
	}
	config := fmt.Sprintf(prometheusConfig, relabel)
	config = "    " + strings.ReplaceAll(strings.TrimSuffix(config, "\n"), "\n", "\n    ")
	priority := ""
	if o.PriorityClassName != "" {
		priority = "\n  priorityClassName: " + o.PriorityClassName
	}
	return fmt.Appendf(nil, prometheusManifest, namespace, registry+"/"+PrometheusImage, config, registry+"/"+DemoappImage, priority)
}
