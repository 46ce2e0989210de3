package plugin

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// FieldManager is the field manager of the objects kubectl-app writes.
const FieldManager = "kubectl-app"

// Values of create's --dry-run, as kubectl has them.
const (
	dryRunNone   = "none"
	dryRunClient = "client"
	dryRunServer = "server"
)

// createOptions are the flags of `kubectl app create`.
type createOptions struct {
	image      string
	deployment string
	replicas   int32
	// ports are the --port values, "[NAME=]PORT".
	ports   []string
	service string
	dryRun  string
	// command is what follows -- on the command line: the container's command, as
	// kubectl create deployment sets it.
	command []string
}

// namedPort is a parsed --port.
type namedPort struct {
	name string
	port int32
}

// parsePorts parses the --port values: the first is the App's port (containerPort and
// the Service's first port; a NAME names the Service port); each further one needs a
// NAME, which names the container port and the Service port that targets it.
func parsePorts(values []string) ([]namedPort, error) {
	out := make([]namedPort, 0, len(values))
	for i, v := range values {
		name, number, named := strings.Cut(v, "=")
		if !named {
			name, number = "", v
		}
		n, err := strconv.ParseInt(number, 10, 32)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("invalid --port %q: want [NAME=]PORT with PORT from 1 to 65535", v)
		}
		if i > 0 && name == "" {
			return nil, fmt.Errorf("invalid --port %q: a port after the first needs a name, say --port metrics=%s", v, number)
		}
		out = append(out, namedPort{name: name, port: int32(n)})
	}
	return out, nil
}

// newApp returns the App the options describe, in namespace (empty: the metadata names
// none). replicasSet tells whether --replicas was given: without it the App leaves the
// count to the Deployment (and to whoever scales it).
func (o *createOptions) newApp(name, namespace string, replicasSet bool, ports []namedPort) *appv1.App {
	app := &appv1.App{
		TypeMeta:   metav1.TypeMeta{APIVersion: appGroupVersion.String(), Kind: "App"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
	}
	deployment := o.deployment
	if deployment == "" {
		deployment = name
	}
	d := &appv1.DeploymentTemplate{Name: deployment, Image: o.image, Command: o.command}
	if replicasSet {
		d.Replicas = ptr.To(o.replicas)
	}
	var first int32
	if len(ports) > 0 {
		first = ports[0].port
		d.ContainerPort = ptr.To(first)
	}
	for _, p := range ports[min(1, len(ports)):] {
		d.Ports = append(d.Ports, appv1.ContainerPort{Name: p.name, ContainerPort: p.port})
	}
	app.Spec.DeploymentTemplate = d
	if len(ports) > 0 || o.service != "" {
		service := o.service
		if service == "" {
			service = name
		}
		app.Spec.ServiceTemplate = &appv1.ServiceTemplate{Name: service, Port: first}
		if len(ports) > 0 {
			app.Spec.ServiceTemplate.PortName = ports[0].name
		}
		for _, p := range ports[min(1, len(ports)):] {
			target := intstr.FromString(p.name)
			app.Spec.ServiceTemplate.Ports = append(app.Spec.ServiceTemplate.Ports, appv1.ServicePort{Name: p.name, Port: p.port, TargetPort: &target})
		}
	}
	return app
}

// createArgs accepts the App's name, then, after --, the container's command and its
// arguments, as kubectl create deployment does.
func createArgs(cmd *cobra.Command, args []string) error {
	names := cmd.ArgsLenAtDash()
	if names < 0 {
		names = len(args)
	}
	if names != 1 || args[0] == "" {
		return fmt.Errorf("expected the name of one App, got %d arguments (the container's command and its arguments go after --)\nUsage: %s", names, cmd.UseLine())
	}
	return nil
}

// createCommand returns `kubectl app create NAME --image IMG [-- COMMAND [ARGS...]]`.
func (c *command) createCommand() *cobra.Command {
	o := &createOptions{dryRun: dryRunNone}
	printFlags := genericclioptions.NewPrintFlags("created")
	cmd := &cobra.Command{
		Use:   "create NAME --image IMAGE [--replicas N] [--port [NAME=]PORT]... [--service NAME] [--dry-run=none|client|server] [-o yaml|json|name] [-- COMMAND [ARGS...]]",
		Short: "Create an App that runs an image, like kubectl create deployment",
		Long: `Create an App (appcontroller.k8s.io/v1) that runs one image, as kubectl create deployment
creates a Deployment. The App's Deployment is named NAME unless --deployment says
otherwise. With --port or --service the App has a Service too, named NAME unless --service
names it, listening on --port (default 8080) and sending traffic to the container's port
--port. --port may be repeated: each further --port NAME=PORT adds a container port and a
Service port of that name targeting it (a metrics or gRPC port); the first may be named
too (the Service port's name, http by default). Without --replicas the App leaves the
replica count to its Deployment (1, then whoever scales it). What follows -- is the
container's command and its arguments (spec.deploymentTemplate.command), in place of the
image's entrypoint, as kubectl create deployment sets it.

The App is created with field manager kubectl-app. --dry-run=client prints the App without
sending it, --dry-run=server has the API server validate and default it without storing it.`,
		Example: `  kubectl app create web --image nginx --replicas 2 --port 80
  kubectl app create echo --image registry.example.com/agnhost:2.66.1 --port 8080 -- /agnhost netexec --http-port 8080
  kubectl app create api --image registry.example.com/api:1 --port 8080 --port metrics=9090 --port grpc=9000
  kubectl app create web --image nginx --service web-svc --dry-run=client -o yaml`,
		Args: createArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() >= 0 {
				o.command = args[cmd.ArgsLenAtDash():]
			}
			switch o.dryRun {
			case dryRunNone:
			case dryRunClient:
				if err := printFlags.Complete("%s (dry run)"); err != nil {
					return fmt.Errorf("completing the output flags: %w", err)
				}
			case dryRunServer:
				if err := printFlags.Complete("%s (server dry run)"); err != nil {
					return fmt.Errorf("completing the output flags: %w", err)
				}
			default:
				return fmt.Errorf(`invalid --dry-run value %q: must be "none", "server", or "client"`, o.dryRun)
			}
			printer, err := printFlags.ToPrinter()
			if err != nil {
				return err
			}
			namespace, explicit, err := c.flags.ToRawKubeConfigLoader().Namespace()
			if err != nil {
				return fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
			}
			name := args[0]
			replicasSet := cmd.Flags().Changed("replicas")
			ports, err := parsePorts(o.ports)
			if err != nil {
				return err
			}
			if o.dryRun == dryRunClient {
				// As kubectl create: the namespace shows only when given on the command line.
				ns := ""
				if explicit {
					ns = namespace
				}
				return printCreated(printer, o.newApp(name, ns, replicasSet, ports), c.streams.Out)
			}
			clients, err := c.newClients()
			if err != nil {
				return err
			}
			opts := metav1.CreateOptions{FieldManager: FieldManager}
			if o.dryRun == dryRunServer {
				opts.DryRun = []string{metav1.DryRunAll}
			}
			created, err := clients.Apps.AppcontrollerV1().Apps(namespace).Create(cmd.Context(), o.newApp(name, namespace, replicasSet, ports), opts)
			if err != nil {
				return &APIError{Err: err}
			}
			// The typed client drops apiVersion and kind; the printers need them.
			created.SetGroupVersionKind(appGroupVersion.WithKind("App"))
			return printCreated(printer, created, c.streams.Out)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.image, "image", "", "Image of the App's container (required).")
	f.StringVar(&o.deployment, "deployment", "", "Name of the App's Deployment; default NAME.")
	f.Int32Var(&o.replicas, "replicas", 1, "Replicas of the App's Deployment; unset, the App leaves the count to the Deployment.")
	f.StringArrayVar(&o.ports, "port", nil, "[NAME=]PORT: a port of the container and of the App's Service (which it adds, named NAME unless --service says); repeat it for more ports, each further one named.")
	f.StringVar(&o.service, "service", "", "Name of the App's Service (adds one; its port is --port, else 8080).")
	f.StringVar(&o.dryRun, "dry-run", dryRunNone, `Must be "none", "server", or "client". client: print the App without sending it; server: have the API server validate it without storing it.`)
	if err := cmd.MarkFlagRequired("image"); err != nil {
		panic(fmt.Sprintf("marking --image required: %v", err))
	}
	if err := cmd.RegisterFlagCompletionFunc("dry-run", cobra.FixedCompletions([]string{dryRunNone, dryRunClient, dryRunServer}, cobra.ShellCompDirectiveNoFileComp)); err != nil {
		panic(fmt.Sprintf("registering the completion of --dry-run: %v", err))
	}
	printFlags.AddFlags(cmd)
	return cmd
}

// printCreated prints the App create made (or would make) with printer p.
func printCreated(p printers.ResourcePrinter, app *appv1.App, w io.Writer) error {
	if err := p.PrintObj(app, w); err != nil {
		return fmt.Errorf("printing App %s: %w", app.Name, err)
	}
	return nil
}
