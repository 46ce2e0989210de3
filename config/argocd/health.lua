-- Argo CD resource health check of appcontroller.k8s.io/App, the same verdicts as
-- kstatus (sigs.k8s.io/cli-utils/pkg/kstatus) reads from the App's status:
--   being deleted                                   -> Progressing (kstatus: Terminating)
--   status.observedGeneration != metadata.generation -> Progressing (InProgress)
--   Reconciling=True, reason RolloutPaused         -> Suspended   (InProgress: a canary
--                                                      rollout waits for kubectl app promote)
--   Reconciling=True                                -> Progressing (InProgress)
--   Stalled=True                                    -> Degraded    (Failed)
--   Ready=True                                      -> Healthy     (Current)
--   anything else                                   -> Progressing
-- Install: the argocd-cm key resource.customizations.health.appcontroller.k8s.io_App
-- (docs/how-to/gitops.md).
local hs = {}

if obj.metadata ~= nil and obj.metadata.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  hs.message = "The App is being deleted"
  return hs
end

local generation = 0
if obj.metadata ~= nil and obj.metadata.generation ~= nil then
  generation = obj.metadata.generation
end

if obj.status == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to observe the App"
  return hs
end

if obj.status.observedGeneration ~= nil and obj.status.observedGeneration ~= generation then
  hs.status = "Progressing"
  if obj.status.observedGeneration < 0 then
    hs.message = "Waiting for the controller to observe the App"
  else
    hs.message = "Waiting for the controller to observe generation " .. tostring(generation)
  end
  return hs
end

local ready = nil
if obj.status.conditions ~= nil then
  for _, condition in ipairs(obj.status.conditions) do
    if condition.type == "Reconciling" and condition.status == "True" then
      hs.status = "Progressing"
      if condition.reason == "RolloutPaused" then
        hs.status = "Suspended"
      end
      hs.message = condition.message or condition.reason or "Reconciling"
      return hs
    end
    if condition.type == "Stalled" and condition.status == "True" then
      hs.status = "Degraded"
      hs.message = condition.message or condition.reason or "Stalled"
      return hs
    end
    if condition.type == "Ready" then
      ready = condition
    end
  end
end

if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message or "Ready"
  return hs
end

hs.status = "Progressing"
if ready ~= nil then
  hs.message = ready.message or ready.reason or "Not ready"
else
  hs.message = "Waiting for the App to become Ready"
end
return hs
