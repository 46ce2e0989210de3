package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/app-controller/app-controller/pkg/version"
)

// controllerSelector selects the controller's Deployment: config/manager and the Helm
// chart label it so.
const controllerSelector = "app.kubernetes.io/name=app-controller"

// versionLabel is the label of the controller's pods that carries its version.
const versionLabel = "app.kubernetes.io/version"

// deploymentResource is the resource of apps/v1 Deployments.
var deploymentResource = appsv1.SchemeGroupVersion.WithResource("deployments")

// VersionInfo is what `kubectl app version` prints.
type VersionInfo struct {
	// Plugin is the build of kubectl-app.
	Plugin version.Info `json:"plugin"`
	// Controllers are the controller Deployments found; absent with --client.
	Controllers []ControllerVersion `json:"controllers,omitempty"`
	// ControllerNote says why there is no controller version: "controller not found",
	// or the error of the lookup. Absent with --client.
	ControllerNote string `json:"controllerNote,omitempty"`
}

// ControllerVersion is the version of a controller Deployment.
type ControllerVersion struct {
	// Deployment is namespace/name of the controller's Deployment.
	Deployment string `json:"deployment"`
	// Image is the image of its container.
	Image string `json:"image"`
	// Version is the app.kubernetes.io/version label of its pods, else the tag of its
	// image, else "unknown".
	Version string `json:"version"`
}

// controllerVersions returns the versions of the Deployments labelled
// app.kubernetes.io/name=app-controller in namespace ("": every namespace), sorted by
// namespace and name.
func controllerVersions(ctx context.Context, c Clients, namespace string) ([]ControllerVersion, error) {
	list, err := c.Dynamic.Resource(deploymentResource).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: controllerSelector})
	if err != nil {
		where := "in namespace " + namespace
		if namespace == "" {
			where = "in all namespaces"
		}
		return nil, fmt.Errorf("listing the Deployments labelled %s %s: %w", controllerSelector, where, err)
	}
	var out []ControllerVersion
	for _, u := range list.Items {
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
			return nil, fmt.Errorf("decoding Deployment %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		out = append(out, deploymentVersion(&d))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Deployment < out[j].Deployment })
	return out, nil
}

// deploymentVersion reads the controller's version from its Deployment: the
// app.kubernetes.io/version label of its pod template, else the tag of its image.
func deploymentVersion(d *appsv1.Deployment) ControllerVersion {
	v := ControllerVersion{Deployment: d.Namespace + "/" + d.Name, Version: version.Unknown}
	if cs := d.Spec.Template.Spec.Containers; len(cs) > 0 {
		v.Image = cs[0].Image
		for _, c := range cs {
			if c.Name == "manager" || c.Name == "app-controller" {
				v.Image = c.Image
			}
		}
	}
	if l := d.Spec.Template.Labels[versionLabel]; l != "" {
		v.Version = l
	} else if tag := imageTag(v.Image); tag != "" {
		v.Version = tag
	}
	return v
}

// imageTag returns the tag of an image reference, "" when it has none (a digest alone,
// or no tag).
func imageTag(image string) string {
	image, _, _ = strings.Cut(image, "@")
	slash := strings.LastIndex(image, "/")
	if colon := strings.LastIndex(image, ":"); colon > slash {
		return image[colon+1:]
	}
	return ""
}

// versionCommand returns `kubectl app version`.
func (c *command) versionCommand() *cobra.Command {
	var client bool
	var controllerNamespace, output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version and the controller's",
		Long: `Print the version of kubectl-app and of the app-controller the cluster runs.

The controller is the Deployment labelled app.kubernetes.io/name=app-controller, looked
for in every namespace (or in --controller-namespace); its version is its pods'
app.kubernetes.io/version label, else its image's tag. --client prints the plugin's only,
without contacting the cluster.`,
		Example: `  kubectl app version
  kubectl app version --client -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != outputJSON && output != outputYAML {
				return fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: json,yaml", output)
			}
			info := VersionInfo{Plugin: version.Get()}
			var lookupErr error
			if !client {
				info.Controllers, info.ControllerNote, lookupErr = c.controllerInfo(cmd.Context(), controllerNamespace)
			}
			if err := printVersion(c.streams.Out, info, client, output); err != nil {
				return err
			}
			return lookupErr
		},
	}
	cmd.Flags().BoolVar(&client, "client", false, "Print the plugin's version only; do not contact the cluster.")
	cmd.Flags().StringVar(&controllerNamespace, "controller-namespace", "", "Look for the controller's Deployment in this namespace only; default: every namespace.")
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format. One of: (json, yaml). Default: lines of text.")
	if err := cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{outputJSON, outputYAML}, cobra.ShellCompDirectiveNoFileComp)); err != nil {
		panic(fmt.Sprintf("registering the completion of -o: %v", err))
	}
	if err := cmd.RegisterFlagCompletionFunc("controller-namespace", c.completeNamespaces); err != nil {
		panic(fmt.Sprintf("registering the completion of --controller-namespace: %v", err))
	}
	return cmd
}

// controllerInfo finds the controller Deployments. An absent controller is a note, not
// an error; an error of the lookup is both (the version of the plugin is printed first).
func (c *command) controllerInfo(ctx context.Context, namespace string) ([]ControllerVersion, string, error) {
	clients, err := c.newClients()
	if err != nil {
		return nil, "cannot connect: " + err.Error(), err
	}
	versions, err := controllerVersions(ctx, clients, namespace)
	if err != nil {
		return nil, err.Error(), err
	}
	if len(versions) == 0 {
		return nil, "controller not found", nil
	}
	return versions, "", nil
}

// printVersion writes info as text lines, JSON or YAML.
func printVersion(w io.Writer, info VersionInfo, client bool, output string) error {
	switch output {
	case outputJSON:
		b, err := json.MarshalIndent(info, "", "  ")
		if err != nil {
			return fmt.Errorf("encoding the version as JSON: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case outputYAML:
		b, err := yaml.Marshal(info)
		if err != nil {
			return fmt.Errorf("encoding the version as YAML: %w", err)
		}
		_, err = w.Write(b)
		return err
	}
	p := info.Plugin
	fmt.Fprintf(w, "Plugin Version: %s (commit %s, %s, %s)\n", p.Version, p.Commit, p.GoVersion, p.Platform)
	if client {
		return nil
	}
	if len(info.Controllers) == 0 {
		fmt.Fprintf(w, "Controller Version: unknown (%s)\n", oneLine(info.ControllerNote))
		return nil
	}
	for _, v := range info.Controllers {
		fmt.Fprintf(w, "Controller Version: %s (Deployment %s, image %s)\n", v.Version, v.Deployment, v.Image)
	}
	return nil
}
