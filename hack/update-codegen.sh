#!/usr/bin/env bash
# Regenerates everything generated from pkg/apis: deepcopy and register code, the typed
# clientset, listers, informers and apply configurations (k8s.io/code-generator's
# kube_codegen.sh, at the version pinned in go.mod), the CRD (controller-gen, pinned
# as a tool in go.mod), the ClusterRole from the +kubebuilder:rbac markers of the
# controllers (controller-gen) and the API reference docs/api.md (crd-ref-docs, pinned in
# hack/tools/docs). Nothing is downloaded but Go modules.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"

MODULE="$(go list -m)"
CODEGEN_PKG="$(go list -m -f '{{.Dir}}' k8s.io/code-generator)"
# kube_codegen.sh go-installs its generators; keep them in the project's bin/.
export GOBIN="${ROOT}/bin/codegen"
mkdir -p "${GOBIN}"

# shellcheck source=/dev/null
source "${CODEGEN_PKG}/kube_codegen.sh"

BOILERPLATE="${ROOT}/hack/boilerplate.go.txt"

kube::codegen::gen_helpers --boilerplate "${BOILERPLATE}" "${ROOT}/pkg/apis"

kube::codegen::gen_register --boilerplate "${BOILERPLATE}" "${ROOT}/pkg/apis"

# The App's spec and status embed apps/v1 and core/v1 types: reuse client-go's apply
# configurations for them instead of generating copies (without an entry here the
# generated apply configuration would hold the plain API type). Every k8s.io/api type
# that types.go names must be listed.
externals=()
for t in apps/v1.DeploymentStatus apps/v1.DeploymentCondition apps/v1.DeploymentStrategy \
    core/v1.ServiceStatus core/v1.LoadBalancerStatus core/v1.LoadBalancerIngress core/v1.PortStatus \
    core/v1.EnvVar core/v1.EnvVarSource core/v1.EnvFromSource \
    core/v1.ResourceRequirements core/v1.ResourceClaim \
    core/v1.Probe core/v1.SecurityContext core/v1.PodSecurityContext \
    core/v1.ConfigMapVolumeSource core/v1.SecretVolumeSource core/v1.EmptyDirVolumeSource \
    core/v1.PersistentVolumeClaimVolumeSource core/v1.LocalObjectReference \
    core/v1.Toleration core/v1.Affinity core/v1.TopologySpreadConstraint; do
    group_version="${t%.*}"
    externals+=("k8s.io/api/${t}:k8s.io/client-go/applyconfigurations/${group_version}")
done

kube::codegen::gen_client \
    --with-watch \
    --with-applyconfig \
    --applyconfig-externals "$(IFS=,; echo "${externals[*]}")" \
    --output-dir "${ROOT}/pkg/generated" \
    --output-pkg "${MODULE}/pkg/generated" \
    --boilerplate "${BOILERPLATE}" \
    "${ROOT}/pkg/apis"

go tool controller-gen \
    crd:crdVersions=v1 \
    paths="./pkg/apis/..." \
    output:crd:artifacts:config=config/crd/bases

go tool controller-gen \
    rbac:roleName=app-controller \
    paths="./pkg/..." \
    output:rbac:artifacts:config=config/rbac

# The API reference docs/api.md, from the types' doc comments and markers: crd-ref-docs,
# pinned in its own module (hack/tools/docs) and built once into bin/codegen.
if [ ! -x "${GOBIN}/crd-ref-docs" ] || [ hack/tools/docs/go.mod -nt "${GOBIN}/crd-ref-docs" ]; then
    (cd hack/tools/docs && go build -o "${GOBIN}/crd-ref-docs" github.com/elastic/crd-ref-docs)
fi
"${GOBIN}/crd-ref-docs" \
    --source-path=pkg/apis \
    --config=hack/api-docs.yaml \
    --renderer=markdown \
    --output-path=docs/api.md \
    --log-level=ERROR
