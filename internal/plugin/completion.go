package plugin

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// completionTimeout bounds the API requests of a completion: a shell waits for it.
const completionTimeout = 5 * time.Second

// namespaceResource is the resource of core/v1 Namespaces.
var namespaceResource = corev1.SchemeGroupVersion.WithResource("namespaces")

// completeAppNames completes the NAME argument of tree and status with the names of the
// Apps in the namespace of -n (else the kubeconfig's). Errors complete nothing: a shell
// has nowhere to show them.
func (c *command) completeAppNames(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	clients, namespace, err := c.setup()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	ctx, cancel := context.WithTimeout(completionContext(cmd), completionTimeout)
	defer cancel()
	apps, err := ListApps(ctx, clients, namespace)
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	names := make([]string, 0, len(apps))
	for _, a := range apps {
		names = append(names, a.Name)
	}
	return withPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeNamespaces completes -n and --controller-namespace with the cluster's
// namespaces.
func (c *command) completeNamespaces(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	clients, err := c.newClients()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	ctx, cancel := context.WithTimeout(completionContext(cmd), completionTimeout)
	defer cancel()
	var names []string
	client := clients.Dynamic.Resource(namespaceResource)
	err = paged(ctx, func(opts metav1.ListOptions) (string, error) {
		list, err := client.List(ctx, opts)
		if err != nil {
			return "", err
		}
		for _, u := range list.Items {
			names = append(names, u.GetName())
		}
		return list.GetContinue(), nil
	})
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	sort.Strings(names)
	return withPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completionContext is the context of cmd, or a background one when cobra gave none.
func completionContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// withPrefix returns the names that start with prefix.
func withPrefix(names []string, prefix string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}
