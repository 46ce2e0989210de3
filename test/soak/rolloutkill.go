package soak

import (
	"context"
	"fmt"
	"time"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// The faults that kill the leader of a shard while one of its canary Apps is in a
// phase of its rollout, chosen from the App's status as the driver's informer delivers
// it: at a setWeight step, at a pause, while promoting (past the last step, the stable
// Deployment rolling to the new template), while aborting (within 2 s of the abort
// written). The new leader must carry the rollout on from the status: no step jumped
// (the audit log's checks) and every App converged within the bound.
const (
	FaultRolloutKillStep      = "rollout-kill-step"
	FaultRolloutKillPause     = "rollout-kill-pause"
	FaultRolloutKillPromoting = "rollout-kill-promoting"
	FaultRolloutKillAborting  = "rollout-kill-aborting"
	// rolloutPhaseWait is how long such a fault waits for a canary in its phase.
	rolloutPhaseWait = 2 * time.Minute
	// abortingWithin is how recent an abort must be for "while aborting".
	abortingWithin = 2 * time.Second
)

// inPhase returns a live canary App whose rollout is in the phase of fault kind now
// (nil if none), and where its rollout is.
func (w *world) inPhase(kind string, now time.Time) (*appRecord, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.live() {
		ro, current := rolloutOf(r)
		if !r.isCanary() || ro == nil || !current || ro.Canary == nil || r.latest.Spec.Rollout == nil || r.latest.Spec.Rollout.Canary == nil {
			continue
		}
		steps := r.latest.Spec.Rollout.Canary.Steps
		k := int(ro.CurrentStepIndex)
		var in bool
		switch kind {
		case FaultRolloutKillStep:
			in = ro.Phase == appv1.RolloutProgressing && k < len(steps) && steps[k].SetWeight != nil
		case FaultRolloutKillPause:
			in = ro.Phase == appv1.RolloutPaused && k < len(steps)
		case FaultRolloutKillPromoting:
			in = ro.Phase == appv1.RolloutProgressing && k >= len(steps)
		case FaultRolloutKillAborting:
			n := len(r.states)
			in = ro.Phase == appv1.RolloutAborted && n > 0 && r.states[n-1].reason == appv1.ReasonRolloutAborted && now.Sub(r.states[n-1].at) < abortingWithin
		}
		if in {
			return r, describeRollout(ro)
		}
	}
	return nil, ""
}

// rolloutKill waits (up to rolloutPhaseWait) for a canary App in the phase of fault
// kind and kills the leader of its shard with SIGKILL. The leaders are found first, so
// that the kill follows the sighting by no more than the informer's delay.
func (j *injector) rolloutKill(ctx context.Context, kind string, rec *FaultRecord) error {
	leaders := map[string]instance{}
	for _, shard := range []string{shardA, shardB} {
		in, err := j.leader(ctx, shard)
		if err != nil {
			return err
		}
		leaders[shard] = in
	}
	deadline := time.Now().Add(rolloutPhaseWait)
	for {
		r, where := j.world.inPhase(kind, time.Now())
		if r != nil {
			j.world.mu.Lock()
			shard := r.shard
			j.world.mu.Unlock()
			leader := leaders[shard]
			rec.Start = time.Now()
			rec.Detail = fmt.Sprintf("SIGKILL of the leader of shard %s, %s, while App %s's rollout was at %s", shard, leader.process, r.key(), where)
			return j.fleet.kill(ctx, leader)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no canary App's rollout reached the phase of %s within %s", kind, rolloutPhaseWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
