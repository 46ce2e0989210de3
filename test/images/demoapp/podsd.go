package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// `demoapp pods-sd` is the discovery of the pods of the cluster for Prometheus's
// http_sd_configs: Debian's Prometheus (the image prometheus:2.42.0 of the real node) is
// built without kubernetes_sd_configs (Debian does not package client-go), so it runs
// this beside it, in its pod, and asks it for its targets on loopback. It serves the
// pods as kubernetes_sd_configs' role pod would give them: a target per declared
// container port (the pod's IP alone if it declares none), with the same __meta_kubernetes_pod_*
// labels, so the scrape configuration's relabelling is the one of kubernetes_sd.

// targetGroup is one entry of an http_sd answer.
type targetGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// invalidLabelChars are the characters Prometheus replaces with _ in a label name.
var invalidLabelChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// podTargets returns the target groups of pods (sorted in place by namespace and name):
// only pods with an IP.
func podTargets(pods []*corev1.Pod) []targetGroup {
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	groups := []targetGroup{}
	for _, p := range pods {
		if p.Status.PodIP == "" {
			continue
		}
		meta := map[string]string{
			"__meta_kubernetes_namespace":      p.Namespace,
			"__meta_kubernetes_pod_name":       p.Name,
			"__meta_kubernetes_pod_ip":         p.Status.PodIP,
			"__meta_kubernetes_pod_phase":      string(p.Status.Phase),
			"__meta_kubernetes_pod_ready":      strconv.FormatBool(podReady(p)),
			"__meta_kubernetes_pod_node_name":  p.Spec.NodeName,
			"__meta_kubernetes_pod_uid":        string(p.UID),
			"__meta_kubernetes_pod_host_ip":    p.Status.HostIP,
			"__meta_kubernetes_pod_controller": controllerName(p),
		}
		for k, v := range p.Labels {
			meta["__meta_kubernetes_pod_label_"+invalidLabelChars.ReplaceAllString(k, "_")] = v
		}
		for k, v := range p.Annotations {
			meta["__meta_kubernetes_pod_annotation_"+invalidLabelChars.ReplaceAllString(k, "_")] = v
		}
		ports := 0
		for _, c := range p.Spec.Containers {
			for _, port := range c.Ports {
				if port.Protocol != "" && port.Protocol != corev1.ProtocolTCP {
					continue
				}
				portMeta := maps.Clone(meta)
				portMeta["__meta_kubernetes_pod_container_name"] = c.Name
				portMeta["__meta_kubernetes_pod_container_port_name"] = port.Name
				portMeta["__meta_kubernetes_pod_container_port_number"] = strconv.Itoa(int(port.ContainerPort))
				groups = append(groups, targetGroup{Targets: []string{net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(port.ContainerPort)))}, Labels: portMeta})
				ports++
			}
		}
		if ports == 0 {
			groups = append(groups, targetGroup{Targets: []string{p.Status.PodIP}, Labels: meta})
		}
	}
	return groups
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func controllerName(p *corev1.Pod) string {
	for _, ref := range p.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			return ref.Name
		}
	}
	return ""
}

// podsSDHandler answers every GET with the target groups of the pods lister holds.
func podsSDHandler(lister corelisters.PodLister) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		pods, err := lister.List(labels.Everything())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(podTargets(pods))
	})
}

// runPodsSD serves the pods of the cluster (in-cluster configuration, or --kubeconfig)
// on --listen until ctx is done.
func runPodsSD(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demoapp pods-sd", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9091", "address to serve the targets on (Prometheus's http_sd_configs url)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var cfg *rest.Config
	var err error
	if *kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", *kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return fmt.Errorf("loading the client configuration: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating the client: %w", err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	pods := factory.Core().V1().Pods()
	lister := pods.Lister()
	synced := pods.Informer().HasSynced
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		return errors.New("the pods' cache did not sync")
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *listen, err)
	}
	srv := &http.Server{Handler: podsSDHandler(lister), ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("demoapp pods-sd serving the cluster's pods on %s\n", l.Addr())
	return serveUntilDone(ctx, srv, l, 0, "")
}
