package plugin

import (
	"fmt"

	"github.com/spf13/cobra"
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
			if to < 0 {
				return fmt.Errorf("--to-revision must be a revision number, got %d", to)
			}
			clients, namespace, err := c.setup()
			if err != nil {
				return err
			}
			res, err := Rollback(cmd.Context(), clients, namespace, args[0], to)
			if err != nil {
				return describe(err, "rolling back App %s/%s", namespace, args[0])
			}
			if len(res.Changes) == 0 {
				fmt.Fprintf(c.streams.Out, "app.appcontroller.k8s.io/%s skipped rollback (the spec already matches revision %d)\n", args[0], res.To.Number)
				return nil
			}
			fmt.Fprintf(c.streams.Out, "app.appcontroller.k8s.io/%s rolled back to revision %d\n%s", args[0], res.To.Number, formatChanges(res.Changes))
			return nil
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
leaves that annotation alone; kubectl rollout restart deployment/NAME works the same.`,
		Example:           `  kubectl app restart web`,
		Args:              appName,
		ValidArgsFunction: c.completeAppNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			clients, namespace, err := c.setup()
			if err != nil {
				return err
			}
			deployment, err := Restart(cmd.Context(), clients, namespace, args[0], c.now())
			if err != nil {
				return describe(err, "restarting App %s/%s", namespace, args[0])
			}
			fmt.Fprintf(c.streams.Out, "app.appcontroller.k8s.io/%s restarted (Deployment %s rolls its pods)\n", args[0], deployment)
			return nil
		},
	}
	return cmd
}
