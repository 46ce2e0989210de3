package plugin

import (
	"fmt"

	"github.com/spf13/cobra"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// historyCommand returns `kubectl app history NAME [--revision N]`.
func (c *command) historyCommand() *cobra.Command {
	var revision int64
	cmd := &cobra.Command{
		Use:   "history NAME [--revision N]",
		Short: "List the revisions of an App's spec",
		Long: `List the revisions of an App's spec, oldest first: every change of the spec is recorded by
the controller as a revision (a ControllerRevision the App owns; spec.revisionHistoryLimit
of them are kept, 10 by default). The current revision is marked. CHANGE-CAUSE is the
App's kubernetes.io/change-cause annotation when the revision was made.

With --revision N the command prints that revision's spec as YAML.`,
		Example: `  kubectl app history web
  kubectl app history web --revision 2`,
		Args:              appName,
		ValidArgsFunction: c.completeAppNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			clients, namespace, err := c.setup()
			if err != nil {
				return err
			}
			h, err := GetHistory(cmd.Context(), clients, namespace, args[0])
			if err != nil {
				return describe(err, "reading the revisions of App %s/%s", namespace, args[0])
			}
			if revision != 0 {
				r := h.find(revision)
				if r == nil {
					return fmt.Errorf("App %s/%s has no revision %d", namespace, args[0], revision)
				}
				return PrintRevision(c.streams.Out, r)
			}
			if len(h.Revisions) == 0 {
				fmt.Fprintf(c.streams.ErrOut, "No revisions of App %s/%s recorded yet.\n", namespace, args[0])
				return nil
			}
			return PrintHistory(c.streams.Out, h, c.now())
		},
	}
	cmd.Flags().Int64Var(&revision, "revision", 0, "Print the spec of this revision.")
	return cmd
}

// rollbackCommand returns `kubectl app rollback NAME [--to-revision N]`.
func (c *command) rollbackCommand() *cobra.Command {
	var to int64
	cmd := &cobra.Command{
		Use:   "rollback NAME [--to-revision N]",
		Short: "Write an earlier revision's spec back into an App",
		Long: `Write the spec of an earlier revision (kubectl app history lists them) back into the App:
the revision before the current one, or --to-revision N. It is an ordinary update of the
App, with field manager kubectl-app, so GitOps tools see that the App differs from their
source. The App's revisionHistoryLimit is kept; its kubernetes.io/change-cause becomes the
revision's. The controller rolls the Deployment and records the spec as the newest
revision. The command prints each field that changed.`,
		Example: `  kubectl app rollback web
  kubectl app rollback web --to-revision 1`,
		Args:              appName,
		ValidArgsFunction: c.completeAppNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.act(cmd, args[0], Action{Kind: ActionRollback, Revision: to})
		},
	}
	cmd.Flags().Int64Var(&to, "to-revision", 0, "The revision to roll back to; 0: the one before the current.")
	return cmd
}

// restartCommand returns `kubectl app restart NAME`.
func (c *command) restartCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "restart NAME",
		Short: "Roll an App's pods, like kubectl rollout restart",
		Long: `Roll the pods of an App, as kubectl rollout restart does to a Deployment: set the
kubectl.kubernetes.io/restartedAt annotation of the pod template of the App's Deployment
to now (field manager kubectl-app). The controller owns the rest of the Deployment and
leaves that annotation alone; kubectl rollout restart deployment/NAME works the same.

An App with a rollout strategy (spec.rollout) is restarted through it: the command sets
the annotation on the App, the controller copies it into the pod template, and the new
pods roll out in canary steps like any other change (kubectl rollout restart of the
Deployment would bypass the steps).`,
		Example:           `  kubectl app restart web`,
		Args:              appName,
		ValidArgsFunction: c.completeAppNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.act(cmd, args[0], Action{Kind: ActionRestart})
		},
	}
	return cmd
}

// rolloutCommand returns `kubectl app promote|abort|pause|resume NAME`: use, short
// help, long help and example of the command, and the action it requests.
func (c *command) rolloutCommand(use, short, long, example string, action appv1.RolloutAction) *cobra.Command {
	var full bool
	cmd := &cobra.Command{
		Use:               use,
		Short:             short,
		Long:              long + "\n\n" + rolloutRequestHelp,
		Example:           example,
		Args:              appName,
		ValidArgsFunction: c.completeAppNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			a := action
			if full {
				a = appv1.RolloutActionPromoteFull
			}
			return c.act(cmd, args[0], Action{Kind: string(a)})
		},
	}
	if action == appv1.RolloutActionPromote {
		cmd.Flags().BoolVar(&full, "full", false, "Skip the remaining steps: the new version becomes the stable one.")
	}
	return cmd
}

// rolloutRequestHelp ends the long help of the rollout commands.
const rolloutRequestHelp = `The command writes a request on the App (the appcontroller.k8s.io/rollout-request
annotation, field manager kubectl-app) naming the rollout and the step it acts on; the
controller acts on it once, and only if the rollout is still there: a request that the
rollout overtook, or one re-applied from an old manifest, does nothing (the App gets a
RolloutRequestIgnored Event). Re-applying the App's manifest from Git neither undoes it
nor brings it back. kubectl app status NAME --watch follows the rollout.`

// rolloutCommands returns promote, abort, pause and resume.
func (c *command) rolloutCommands() []*cobra.Command {
	return []*cobra.Command{
		c.rolloutCommand("promote NAME [--full]", "End the current step of an App's canary rollout, or all of them (--full)",
			`End the current step of the App's canary rollout (spec.rollout): a pause, or a setWeight
step still waiting for its pods. After the last step the rollout is promoted: the stable
Deployment gets the new pod template. With --full the remaining steps are skipped. An
aborted rollout starts its steps again (with --full: is promoted). A blue-green rollout
(spec.rollout.blueGreen) waiting for its switch switches the App's Service to the preview;
after the switch, promote ends the delay the old pods are kept for.`,
			"  kubectl app promote web\n  kubectl app promote web --full", appv1.RolloutActionPromote),
		c.rolloutCommand("abort NAME", "Abort an App's canary rollout: all traffic back to the stable pods",
			`Abort the App's canary rollout: all traffic goes back to the stable pods at once, the
canary pods are scaled to 0 (through an HTTPRoute, after abortScaleDownDelaySeconds),
and the App reports Ready=False, reason RolloutAborted, until a new change of its pods or
kubectl app promote (which starts the steps again). A rollout being promoted (past its
last step) can no longer be aborted: kubectl app rollback goes back. A blue-green
rollout aborted after its switch, within scaleDownDelaySeconds, switches the App's
Service back to the old pods, which still run.`,
			"  kubectl app abort web", appv1.RolloutActionAbort),
		c.rolloutCommand("pause NAME", "Hold an App's canary rollout at its current step",
			`Hold the App's canary rollout where it is: no step ends, not even a timed pause, until
kubectl app resume or promote. A failing canary pod still aborts it.`,
			"  kubectl app pause web", appv1.RolloutActionPause),
		c.rolloutCommand("resume NAME", "Go on with an App's canary rollout paused by kubectl app pause",
			`Go on with the App's canary rollout paused by kubectl app pause: the current step starts
again (a timed pause waits its whole duration).`,
			"  kubectl app resume web", appv1.RolloutActionResume),
	}
}

// act makes the write a on the App name of the command's namespace (Act, as the
// dashboard's buttons do) and prints what it did.
func (c *command) act(cmd *cobra.Command, name string, a Action) error {
	clients, namespace, err := c.setup()
	if err != nil {
		return err
	}
	line, err := Act(cmd.Context(), clients, namespace, name, a, c.now())
	if err != nil {
		return err
	}
	fmt.Fprintln(c.streams.Out, line)
	return nil
}
