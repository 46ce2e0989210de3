package app

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/klog/v2"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

// The versions of a canary rollout and their pod templates: the version the App asks
// for now (built from its spec), and the others of its state (built from the spec of
// their revision, read once). The plan's objects are built from them.

// rolloutVersions is the version the App asks for now and its pod template.
type rolloutVersions struct {
	desired  appv1.RolloutVersion
	template *corev1ac.PodTemplateSpecApplyConfiguration
}

// desiredVersion returns the version app's spec asks for now, revision being its
// current revision, with its pod template. Its config hash is the current one when the
// referenced ConfigMaps and Secrets changed since the stable Deployment last saw them,
// else the latest version's of the recorded state cur (the canary's, else the
// stable's): a change that is not of the config keeps the pods' config hash.
func desiredVersion(app *appv1.App, in *syncInput, revision string, cur *appv1.RolloutStatus) (rolloutVersions, error) {
	v := appv1.RolloutVersion{Revision: revision, RestartedAt: app.Annotations[appv1.RestartedAtAnnotation]}
	current, live := in.config.hash, in.live
	seen, known := "", false
	if live != nil {
		seen, known = live.Annotations[appv1.ConfigHashAnnotation]
	}
	switch {
	case in.copies != nil:
		v.ConfigHash = copiesVersion(in.copies, revision, cur, live == nil || current != "" && known && seen != current)
	case live == nil, current != "" && known && seen != current:
		v.ConfigHash = current
	case cur != nil && cur.Canary != nil:
		v.ConfigHash = cur.Canary.ConfigHash
	case cur != nil:
		v.ConfigHash = cur.Stable.ConfigHash
	default:
		v.ConfigHash = live.Spec.Template.Annotations[appv1.ConfigHashAnnotation]
	}
	if in.copies == nil && strings.HasPrefix(v.ConfigHash, copiesPrefix) {
		v.ConfigHash = current // versionedConfig turned off: the pods read the objects again
	}
	template, err := desiredPodTemplate(app, v.ConfigHash, v.RestartedAt)
	if err != nil {
		return rolloutVersions{}, fmt.Errorf("building the pod template of App %s/%s: %w", app.Namespace, app.Name, err)
	}
	if v.PodTemplateHash, err = podTemplateHash(template); err != nil {
		return rolloutVersions{}, err
	}
	return rolloutVersions{desired: v, template: template}, nil
}

// copiesVersion returns the config hash of the version an App with versionedConfig asks
// for, revision being its current revision and cur its recorded state: the copies of its
// objects as they are now when they changed since the stable Deployment last saw them
// (changed) or the App is new; the latest version's (the canary's, else the stable's)
// when it is of the same revision (a change that is not of the config keeps the pods'
// copies); the copies the revision last ran with as stable (a rollback brings the config
// back with the code); else the copies as they are now.
func copiesVersion(cc *configCopies, revision string, cur *appv1.RolloutStatus, changed bool) string {
	var latest *appv1.RolloutVersion
	if cur != nil {
		latest = cmp.Or(cur.Canary, cur.Stable)
	}
	switch {
	case changed:
	case latest != nil && latest.Revision == revision && strings.HasPrefix(latest.ConfigHash, copiesPrefix):
		return latest.ConfigHash
	case cc.recorded != nil:
		return cc.recorded.encode(cc.refs)
	}
	return cc.current.encode(cc.refs)
}

// podTemplateHash identifies a pod template the controller builds.
func podTemplateHash(t *corev1ac.PodTemplateSpecApplyConfiguration) (string, error) {
	data, err := json.Marshal(t)
	if err != nil {
		return "", fmt.Errorf("encoding a pod template: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:5]), nil
}

// initialVersion returns the version the stable Deployment runs when app has no rollout
// state yet: the desired one when there is no Deployment yet or it already runs it (the
// strategy was added alone); otherwise the version of the App's last revision, which the
// controller applied, with the Deployment's config hash and restart.
func (c *Controller) initialVersion(ctx context.Context, app *appv1.App, in *syncInput, vs rolloutVersions) (appv1.RolloutVersion, error) {
	desired, live := vs.desired, in.live
	if live == nil {
		return desired, nil
	}
	d, err := appDeployment(app, vs.template, in.hashes.seen, live)
	if err != nil {
		return desired, err
	}
	if upToDate, err := controller.UpToDate(live, d); err != nil || upToDate {
		return desired, err
	}
	rev := app.Status.CurrentRevision
	if rev == "" || rev == desired.Revision {
		return desired, nil // nothing better known of what it runs
	}
	v := appv1.RolloutVersion{
		Revision:    rev,
		ConfigHash:  live.Spec.Template.Annotations[appv1.ConfigHashAnnotation],
		RestartedAt: live.Spec.Template.Annotations[appv1.RestartedAtAnnotation],
	}
	template, found, err := c.versionTemplate(ctx, app, v)
	if err != nil || !found {
		return desired, err
	}
	v.PodTemplateHash, err = podTemplateHash(template)
	return v, err
}

// versionTemplate builds the pod template of version v of app from the spec of its
// revision, read once from the API server; found is false when the revision is gone.
func (c *Controller) versionTemplate(ctx context.Context, app *appv1.App, v appv1.RolloutVersion) (*corev1ac.PodTemplateSpecApplyConfiguration, bool, error) {
	key := app.Namespace + "/" + v.Revision
	var spec *appv1.AppSpec
	if cached, ok := c.rolloutSpecs.Get(key); ok {
		spec = cached.(*appv1.AppSpec)
	} else {
		rev, err := c.kubeClient.AppsV1().ControllerRevisions(app.Namespace).Get(ctx, v.Revision, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("reading revision %s of App %s/%s: %w", v.Revision, app.Namespace, app.Name, err)
		}
		if !controller.IsControlledBy(rev, app) {
			return nil, false, nil
		}
		var data map[string]appv1.AppSpec
		if err := json.Unmarshal(rev.Data.Raw, &data); err != nil {
			return nil, false, fmt.Errorf("decoding revision %s of App %s/%s: %w", v.Revision, app.Namespace, app.Name, err)
		}
		s := data[appv1.RevisionDataKey]
		spec = &s
		c.rolloutSpecs.Add(key, spec)
	}
	if spec.DeploymentTemplate == nil {
		return nil, false, nil
	}
	old := &appv1.App{ObjectMeta: app.ObjectMeta, Spec: *spec}
	template, err := desiredPodTemplate(old, v.ConfigHash, v.RestartedAt)
	if err != nil {
		return nil, false, fmt.Errorf("building the pod template of revision %s of App %s/%s: %w", v.Revision, app.Namespace, app.Name, err)
	}
	return template, true, nil
}

// templateOf returns the pod template of version v: the desired one's when v is the
// desired version, else built from its revision (found false: it is gone).
func (c *Controller) templateOf(ctx context.Context, app *appv1.App, v *appv1.RolloutVersion, vs rolloutVersions) (*corev1ac.PodTemplateSpecApplyConfiguration, bool, error) {
	if v.PodTemplateHash == vs.desired.PodTemplateHash {
		return vs.template, true, nil
	}
	return c.versionTemplate(ctx, app, *v)
}

// buildRolloutPlan builds the pod templates of plan p of state r: the stable
// Deployment's, and the canary Deployment's when the plan has one.
func (c *Controller) buildRolloutPlan(ctx context.Context, app *appv1.App, r *appv1.RolloutStatus, p *rolloutPlan, vs rolloutVersions) error {
	template, found, err := c.templateOf(ctx, app, r.Stable, vs)
	if err != nil {
		return err
	}
	if !found {
		klog.FromContext(ctx).V(2).Info("The stable revision of the rollout is gone: the stable Deployment is left as it is", "revision", r.Stable.Revision)
		p.holdStable = true
	}
	p.stableTemplate = template
	if p.CanaryReplicas == nil {
		return nil
	}
	// The canary runs the rollout's version; an aborted or promoted one its last.
	v := r.Canary
	if v == nil {
		v = r.Stable
	}
	if p.canaryTemplate, found, err = c.templateOf(ctx, app, v, vs); err != nil || !found {
		p.CanaryReplicas, p.KeepCanary = nil, true // nothing to build it from: left as it is
		return err
	}
	return nil
}
