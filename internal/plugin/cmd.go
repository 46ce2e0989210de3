package plugin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	appclientset "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
)

// Exit codes of kubectl-app.
const (
	// ExitOK: the command did what was asked; for status, the App is Ready.
	ExitOK = 0
	// ExitNotReady: status found the App not Ready.
	ExitNotReady = 1
	// ExitError: the command failed (bad usage, App not found, API error).
	ExitError = 2
)

// Client-side rate limits of the plugin's API clients, unless the kubeconfig sets them.
// The tree lists every namespaced resource once; client-go's defaults (5 QPS, burst 10)
// would make it wait seconds for nothing.
const (
	clientQPS   = 50
	clientBurst = 100
)

// command holds what the subcommands share.
type command struct {
	streams genericiooptions.IOStreams
	flags   *genericclioptions.ConfigFlags
	// newClients makes the API clients from the flags; tests replace it.
	newClients func() (Clients, error)
	// now is the time ages are counted to.
	now func() time.Time
	// exit is the exit code of a command that succeeded; ExitOK unless set.
	exit int
}

// Run runs kubectl-app with args (the command line without the program name) and
// returns its exit code: ExitOK, ExitNotReady (status of an App that is not Ready) or
// ExitError. Errors are written to streams.ErrOut.
func Run(ctx context.Context, args []string, streams genericiooptions.IOStreams) int {
	c := newCommand(streams)
	// The server's warnings go to ErrOut as kubectl writes them, once each, not to klog.
	warnings := rest.NewWarningWriter(streams.ErrOut, rest.WarningWriterOptions{Deduplicate: true})
	c.flags.WrapConfigFn = func(cfg *rest.Config) *rest.Config {
		cfg.WarningHandler, cfg.WarningHandlerWithContext = warnings, nil
		return cfg
	}
	c.newClients = func() (Clients, error) { return clientsFrom(c.flags) }
	return c.run(ctx, args)
}

// newCommand returns the command state of a run writing to streams.
func newCommand(streams genericiooptions.IOStreams) *command {
	return &command{streams: streams, flags: genericclioptions.NewConfigFlags(true), now: time.Now}
}

// Command returns the command tree of kubectl-app, with its flags and help, as Run
// executes it; the reference page docs/reference/kubectl-app.md is generated from it
// (hack/refdocs). Running it needs Run.
func Command() *cobra.Command {
	root := newCommand(genericiooptions.NewTestIOStreamsDiscard()).rootCommand()
	// Cobra adds the completion command when the tree executes.
	root.InitDefaultCompletionCmd()
	return root
}

// run executes the command line and maps its outcome to an exit code.
func (c *command) run(ctx context.Context, args []string) int {
	root := c.rootCommand()
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		var apiErr *APIError
		if errors.As(err, &apiErr) {
			fmt.Fprint(c.streams.ErrOut, kubectlMessage(apiErr.Err))
		} else {
			fmt.Fprintf(c.streams.ErrOut, "error: %v\n", err)
		}
		return ExitError
	}
	return c.exit
}

// rootCommand returns `kubectl app` and its subcommands.
func (c *command) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-app",
		Short: "Create and show Apps (appcontroller.k8s.io/v1) and the health of the objects they own",
		Long: `kubectl app creates and shows Apps (appcontroller.k8s.io/v1) and what they own.

  tree        the objects an App owns, found through their ownerReferences, with their health
  status      a compact health summary and recent Events; exit code 0 when Ready, 1 when not
  list        the Apps of a namespace, or of all, with their Ready condition
  create      create an App running an image, like kubectl create deployment
  history     the revisions of an App's spec, with image and change cause
  rollback    write an earlier revision's spec back into an App
  restart     roll an App's pods, like kubectl rollout restart
  promote     end the current step of an App's canary rollout (--full: all of them)
  abort       abort an App's canary rollout: all traffic back to the stable pods
  pause       hold an App's canary rollout at its current step
  resume      go on with a canary rollout paused by kubectl app pause
  dashboard   a web UI of the Apps, their rollouts and their objects, on 127.0.0.1
  version     the plugin's version and the controller's
  completion  a shell completion script (kubectl itself completes through kubectl_complete-app)

tree, status and list print tables, or objects with -o json|yaml|name|jsonpath=...|go-template=...

Exit codes: 0 success (status: Ready), 1 status: not Ready, 2 error (bad usage, App not
found, API error).`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl app"},
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(c.streams.In)
	root.SetOut(c.streams.Out)
	root.SetErr(c.streams.ErrOut)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w\nSee '%s --help'.", err, cmd.CommandPath())
	})
	c.flags.AddFlags(root.PersistentFlags())
	var verbosity int
	root.PersistentFlags().IntVarP(&verbosity, "v", "v", 0,
		"Verbosity of client-go's logs on stderr: 0 shows none (errors say what failed), 6 shows requests, 8 their bodies.")
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return setLogging(verbosity) }
	if err := root.RegisterFlagCompletionFunc("namespace", c.completeNamespaces); err != nil {
		panic(fmt.Sprintf("registering the completion of --namespace: %v", err))
	}
	root.AddCommand(c.treeCommand(), c.statusCommand(), c.listCommand(), c.createCommand(),
		c.historyCommand(), c.rollbackCommand(), c.restartCommand(), c.dashboardCommand(), c.versionCommand())
	root.AddCommand(c.rolloutCommands()...)
	return root
}

// setLogging sends client-go's klog output to stderr at the given verbosity, or nowhere
// when it is 0: its errors repeat what the command's error says.
func setLogging(verbosity int) error {
	if verbosity <= 0 {
		klog.SetLogger(logr.Discard())
		return nil
	}
	klog.ClearLogger()
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	if err := fs.Set("v", strconv.Itoa(verbosity)); err != nil {
		return fmt.Errorf("setting the log verbosity: %w", err)
	}
	return nil
}

// appName accepts exactly one argument, the App's name.
func appName(cmd *cobra.Command, args []string) error {
	if len(args) != 1 || args[0] == "" {
		return fmt.Errorf("expected the name of one App, got %d arguments\nUsage: %s", len(args), cmd.UseLine())
	}
	return nil
}

// treeCommand returns `kubectl app tree NAME`.
func (c *command) treeCommand() *cobra.Command {
	out := newOutputFlags(false)
	cmd := &cobra.Command{
		Use:   "tree NAME",
		Short: "Show the objects an App owns and their health",
		Long: `Show the objects an App owns, directly or through its children, and their health.

Objects are found by listing every namespaced resource that discovery reports as listable
(metadata only, once per resource) and following ownerReferences by UID, so any kind
shows: the App's Deployment, its ReplicaSets and their Pods, the App's Service, its
EndpointSlices and the Ingress the Service controls.

HEALTH is computed with kstatus: Ready, Progressing, Failed or Unknown. The App's line
shows the reason and message of its Ready condition. A child the App asks for but does not
control shows as Conflict (an object the App does not control holds the name) or Missing.

With -o json, yaml, name, jsonpath or go-template the command prints a List (v1) of the
App and the objects of its tree, the App first, then depth first in the order of the
table. Conflict and Missing lines are not objects of the tree and are left out.`,
		Example: `  kubectl app tree my-app -n my-namespace
  kubectl app tree my-app -o name
  kubectl app tree my-app -o jsonpath='{range .items[*]}{.kind}/{.metadata.name}{"\n"}{end}'`,
		Args:              appName,
		ValidArgsFunction: c.completeAppNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			printer, err := out.printer()
			if err != nil {
				return err
			}
			clients, namespace, err := c.setup()
			if err != nil {
				return err
			}
			tree, err := BuildTree(cmd.Context(), clients, namespace, args[0])
			if err != nil {
				return describe(err, "reading the tree of App %s/%s", namespace, args[0])
			}
			for _, w := range tree.Warnings {
				fmt.Fprintf(c.streams.ErrOut, "Warning: %s\n", w)
			}
			if printer != nil {
				if err := printer.PrintObj(listObject(treeObjects(tree)), c.streams.Out); err != nil {
					return fmt.Errorf("printing the tree of App %s/%s: %w", namespace, args[0], err)
				}
				return nil
			}
			return PrintTree(c.streams.Out, tree)
		},
	}
	out.addFlags(cmd)
	return cmd
}

// statusCommand returns `kubectl app status NAME`, whose exit code says whether the App
// is Ready.
func (c *command) statusCommand() *cobra.Command {
	out := newOutputFlags(false)
	var watch bool
	cmd := &cobra.Command{
		Use:   "status NAME [--watch]",
		Short: "Summarize an App's health and its rollout; exit code 0 when Ready, 1 when not, 2 on errors",
		Long: `Summarize an App's health: its Ready condition, its Deployment's replicas, its Service's
type, cluster IP and ports, its conditions and its most recent Events (at most 10, as
kubectl describe shows them). An App with a rollout strategy (spec.rollout) shows its
rollout too: the phase and the step, the steps, how the traffic is split now (the
weights of its HTTPRoute, or its ready canary and stable pods behind its Service), the
stable and canary revisions and their Deployments, and each pod's track.

With --watch the summary is printed again each time the App changes, until the App is
Ready, its rollout aborted or it is Stalled (a paused rollout is watched on: promote it
from another terminal).

The App is Ready when its Ready condition is True and describes the App's current
generation. Exit code: 0 when Ready, 1 when not, 2 on errors (App not found, API error),
so scripts can wait for an App or gate on it.

With -o json, yaml, name, jsonpath or go-template the command prints the App object; the
exit code still says whether it is Ready.`,
		Example: `  kubectl app status my-app -n my-namespace
  kubectl app status my-app --watch
  until kubectl app status my-app >/dev/null; do sleep 2; done
  kubectl app status my-app -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}'`,
		Args:              appName,
		ValidArgsFunction: c.completeAppNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			printer, err := out.printer()
			if err != nil {
				return err
			}
			if watch && printer != nil {
				return fmt.Errorf("--watch prints the summary: it does not take -o")
			}
			clients, namespace, err := c.setup()
			if err != nil {
				return err
			}
			if watch {
				return c.watchStatus(cmd.Context(), clients, namespace, args[0])
			}
			st, err := GetStatus(cmd.Context(), clients, namespace, args[0])
			if err != nil {
				return describe(err, "reading the status of App %s/%s", namespace, args[0])
			}
			if printer != nil {
				u, err := appObject(st.App)
				if err != nil {
					return err
				}
				if err := printer.PrintObj(u, c.streams.Out); err != nil {
					return fmt.Errorf("printing App %s/%s: %w", namespace, args[0], err)
				}
			} else if err := PrintStatus(c.streams.Out, st, c.now()); err != nil {
				return err
			}
			if !st.Ready {
				c.exit = ExitNotReady
			}
			return nil
		},
	}
	out.addFlags(cmd)
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "Print the summary again each time the App changes, until it is Ready, aborted or Stalled.")
	return cmd
}

// listCommand returns `kubectl app list [-A]`.
func (c *command) listCommand() *cobra.Command {
	var allNamespaces bool
	out := newOutputFlags(true)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List Apps with their Ready condition",
		Long: `List the Apps of the namespace (-n, else the kubeconfig's), or of every namespace (-A),
with the status and reason of their Ready condition and their available replicas; -o wide
adds the image, Deployment and Service of each.

With -o json, yaml, name, jsonpath or go-template the command prints a List (v1) of the
Apps.`,
		Example: `  kubectl app list -n my-namespace
  kubectl app list -A -o wide
  kubectl app list -o name`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			printer, err := out.printer()
			if err != nil {
				return err
			}
			clients, namespace, err := c.setup()
			if err != nil {
				return err
			}
			if allNamespaces {
				namespace = ""
			}
			apps, err := ListApps(cmd.Context(), clients, namespace)
			if err != nil {
				return err
			}
			if printer != nil {
				return printApps(c.streams.Out, printer, apps)
			}
			if len(apps) == 0 {
				if allNamespaces {
					fmt.Fprintln(c.streams.ErrOut, "No Apps found.")
				} else {
					fmt.Fprintf(c.streams.ErrOut, "No Apps found in namespace %s.\n", namespace)
				}
				return nil
			}
			return PrintList(c.streams.Out, apps, allNamespaces, out.isWide(), c.now())
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "List the Apps of every namespace.")
	out.addFlags(cmd)
	return cmd
}

// setup returns the API clients and the namespace of the command.
func (c *command) setup() (Clients, string, error) {
	namespace, _, err := c.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return Clients{}, "", fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
	}
	clients, err := c.newClients()
	if err != nil {
		return Clients{}, "", err
	}
	return clients, namespace, nil
}

// clientsFrom makes the API clients from the kubeconfig flags.
func clientsFrom(flags *genericclioptions.ConfigFlags) (Clients, error) {
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return Clients{}, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 && cfg.Burst == 0 && cfg.RateLimiter == nil {
		cfg.QPS, cfg.Burst = clientQPS, clientBurst
	}
	dc, err := flags.ToDiscoveryClient()
	if err != nil {
		return Clients{}, fmt.Errorf("making a discovery client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return Clients{}, fmt.Errorf("making a dynamic client: %w", err)
	}
	// The walk lists every namespaced resource, deprecated ones too (core/v1 Endpoints):
	// the server's deprecation warnings are about resources the user did not ask for.
	walkCfg := rest.CopyConfig(cfg)
	walkCfg.WarningHandler, walkCfg.WarningHandlerWithContext = rest.NoWarnings{}, nil
	md, err := metadata.NewForConfig(walkCfg)
	if err != nil {
		return Clients{}, fmt.Errorf("making a metadata client: %w", err)
	}
	apps, err := appclientset.NewForConfig(cfg)
	if err != nil {
		return Clients{}, fmt.Errorf("making an App client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Clients{}, fmt.Errorf("making a Kubernetes client: %w", err)
	}
	return Clients{Discovery: dc, Dynamic: dyn, Metadata: md, Apps: apps, Kube: kube}, nil
}

// describe returns err as is when it speaks for itself (the App does not exist, the App
// API is not served), else wrapped with what was being done.
func describe(err error, format string, args ...any) error {
	var notFound *AppNotFoundError
	if errors.As(err, &notFound) {
		return err
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}
