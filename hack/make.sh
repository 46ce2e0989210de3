#!/usr/bin/env bash
# What the Makefile's targets do that takes more than one line of shell. Each target is
# one line that calls a subcommand here; the Makefile passes what it knows in the
# environment (GO, BIN, LDFLAGS, KUBECTL) and as arguments.
#
#   make.sh test STEP...                 make each STEP in order; the control plane
#                                        binaries build in the background meanwhile
#   make.sh cross PKG DIR PLATFORM...    build PKG for each os/arch into DIR/os-arch/
#   make.sh sbom TOOL VERSION DIR HOST PLATFORM...
#                                        the CycloneDX SBOM of each DIR/os-arch/ binary
#   make.sh plugin-dist VERSION TEMPLATE DIST PLATFORM... -- FILE...
#                                        the krew archives and manifest of kubectl-app
#   make.sh manifests IMG                config/default, its image set to IMG
#   make.sh helm-lint HELM CHART KUBE_VERSION
#   make.sh fuzz FUZZTIME PKG:TARGET...
#   make.sh lint GOLANGCI_LINT           golangci-lint (.golangci.yml) on every module of
#                                        ours
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"
GO="${GO:-go}"
BIN="${BIN:-${ROOT}/bin}"

# The steps of `make test` that do not need the control plane binaries: they run while
# the binaries build. Every other step waits for them.
OFFLINE_STEPS=" verify unit test-image "

# failures repeats, after a failed step, the lines of its log (bin/test-STEP.log) that say
# which tests failed and why: a failing test's assertions are buried in its controller's
# log lines, and CI shows only the start and the end of the output.
failures() {
    local log="${BIN}/test-$1.log"
    echo "make test: $1 failed (its whole output is in ${log}); the failing tests and their own lines:"
    # Go's test failures and the lines the tests wrote themselves (FILE_test.go:N:),
    # without the klog lines the controllers wrote through the tests' loggers.
    grep -E '^[[:space:]]*--- FAIL|^(FAIL|panic:)|_test\.go:[0-9]+: ' "${log}" | grep -Ev '_test\.go:[0-9]+: [IWEF][0-9]{4} ' | head -n 80 || true
}

# test makes each step in order (`make STEP PLATFORMS=$TEST_PLATFORMS`). `make tools`
# runs in the background from the start, its log in bin/tools-build.log: the first
# steps leave a core idle while they download modules, link, run generators and tests.
# The first step that needs the binaries waits for them; a failure stops everything.
# A step written A+B makes A and B at the same time (each on its own control plane or
# node; they mostly wait on them), each into its log, printed whole when it ends.
cmd_test() {
    local start tools step rc=0
    start="$(date +%s)"
    mkdir -p "${BIN}"
    # shellcheck disable=SC2086 # TEST_TOOLS is a list of targets
    "${MAKE:-make}" --no-print-directory ${TEST_TOOLS:-tools} >"${BIN}/tools-build.log" 2>&1 &
    tools=$!
    for step in "$@"; do
        if [ -n "${tools}" ] && [[ "${OFFLINE_STEPS}" != *" ${step} "* ]]; then
            echo "make test: waiting for the control plane binaries (make tools, log in bin/tools-build.log) ($(($(date +%s) - start))s since the start)"
            if ! wait "${tools}"; then
                cat "${BIN}/tools-build.log"
                echo "make tools failed" >&2
                exit 1
            fi
            tools=""
        fi
        echo "make test: ${step} ($(($(date +%s) - start))s since the start)"
        if [[ "${step}" == *+* ]]; then
            together "${start}" "${step//+/ }" || { rc=$?; break; }
            continue
        fi
        "${MAKE:-make}" --no-print-directory "${step}" PLATFORMS="${TEST_PLATFORMS}" 2>&1 | tee "${BIN}/test-${step}.log" ||
            { rc=$?; failures "${step}"; break; }
    done
    if [ -n "${tools}" ]; then
        # Stop the build this script started, by its pid, if a step failed first; else
        # wait for it, so that make test leaves the binaries built.
        if [ "${rc}" -ne 0 ]; then
            kill "${tools}" 2>/dev/null || true
        fi
        wait "${tools}" 2>/dev/null || true
    fi
    [ "${rc}" -eq 0 ] || exit "${rc}"
    echo "make test: done ($(($(date +%s) - start))s since the start)"
}

# together makes the steps (a space-separated list) at the same time, each into
# bin/test-STEP.log, and prints each log whole as its step ends. Meanwhile each package's
# result line (ok, FAIL, --- FAIL, panic) is printed as it comes, prefixed by its step, so
# that a run cut short (CI's time limit) still tells how far each step got. It waits for
# every step and fails if any failed, after repeating the failing tests' lines of each.
together() {
    local start="$1" step pid rc=0 failed="" log
    local -A steps=()
    local tails=()
    for step in $2; do
        log="${BIN}/test-${step}.log"
        "${MAKE:-make}" --no-print-directory "${step}" PLATFORMS="${TEST_PLATFORMS}" >"${log}" 2>&1 &
        steps[$!]="${step}"
        tail -n +1 -F "${log}" 2>/dev/null \
            > >(grep --line-buffered -E '^(ok |FAIL|--- FAIL|panic:)' | sed -u "s|^|make test: ${step}: |") &
        tails+=("$!")
    done
    while [ "${#steps[@]}" -gt 0 ]; do
        wait -n -p pid "${!steps[@]}" && rc=0 || rc=$?
        step="${steps[${pid}]}"
        unset "steps[${pid}]"
        echo "make test: ${step} ended, exit status ${rc} ($(($(date +%s) - start))s since the start); its output:"
        cat "${BIN}/test-${step}.log"
        [ "${rc}" -eq 0 ] || failed="${failed} ${step}"
    done
    kill "${tails[@]}" 2>/dev/null || true
    wait "${tails[@]}" 2>/dev/null || true
    for step in ${failed}; do failures "${step}"; done
    [ -z "${failed}" ]
}

# cross builds the package PKG for each PLATFORM (os/arch, or a comma-separated list)
# into DIR/os-arch/NAME (NAME.exe on windows), NAME being the package's last element,
# and prints each binary's platform=path on stdout (the build commands on stderr).
cmd_cross() {
    local pkg="$1" dir="$2" platform os arch exe out
    shift 2
    for platform in $(echo "$@" | tr ',' ' '); do
        os="${platform%%/*}"
        arch="${platform#*/}"
        exe=""
        [ "${os}" = windows ] && exe=.exe
        out="${dir}/${os}-${arch}/$(basename "${pkg}")${exe}"
        echo "GOOS=${os} GOARCH=${arch} CGO_ENABLED=0 ${GO} build -trimpath -ldflags '${LDFLAGS}' -o ${out} ${pkg}" >&2
        GOOS="${os}" GOARCH="${arch}" CGO_ENABLED=0 "${GO}" build -trimpath -ldflags "${LDFLAGS}" -o "${out}" "${pkg}"
        echo "${platform}=${out}"
    done
}

# sbom writes, with cyclonedx-gomod (TOOL), the CycloneDX JSON SBOM of each PLATFORM's
# binary DIR/os-arch/app-controller (cmd_cross built it) to DIR/os-arch/sbom.cdx.json,
# the main component's version VERSION; and copies HOST's (os/arch) to DIR/sbom.cdx.json
# when it is one of them. No serial number, no timestamp: the same binary, the same SBOM.
cmd_sbom() {
    local tool="$1" version="$2" dir="$3" host="$4" platform out
    shift 4
    rm -f "${dir}/sbom.cdx.json"
    for platform in $(echo "$@" | tr ',' ' '); do
        out="${dir}/${platform//\//-}"
        echo "cyclonedx-gomod bin -json -noserial -notimestamp -std -version ${version} -output ${out}/sbom.cdx.json ${out}/app-controller" >&2
        "${tool}" bin -json -noserial -notimestamp -std -version "${version}" \
            -output "${out}/sbom.cdx.json" "${out}/app-controller"
        if [ "${platform}" = "${host}" ]; then
            cp "${out}/sbom.cdx.json" "${dir}/sbom.cdx.json"
        fi
    done
}

# plugin-dist cross-compiles kubectl-app for each PLATFORM into DIST/build and renders,
# with hack/krew, one archive per platform (the binary and each FILE) and the krew
# manifest DIST/app.yaml from TEMPLATE.
cmd_plugin_dist() {
    local version="$1" template="$2" dist="$3" binaries=() files=() arg
    shift 3
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do
        binaries+=("$1")
        shift
    done
    [ $# -gt 0 ] && shift
    for arg in "$@"; do
        files+=(--file "${arg}")
    done
    mkdir -p "${dist}"
    local out built=()
    out="$(cmd_cross ./cmd/kubectl-app "${dist}/build" "${binaries[@]}")"
    for arg in ${out}; do
        built+=(--binary "${arg}")
    done
    "${GO}" run ./hack/krew --version "${version}" --template "${template}" --dist "${dist}" "${files[@]}" "${built[@]}"
}

# manifests prints config/default (CRD, namespace, RBAC, the controller's Deployment)
# with the controller's image set to IMG.
cmd_manifests() {
    local img="$1"
    "${KUBECTL}" kustomize config/default | sed "s|image: app-controller:latest\$|image: ${img}|"
}

# helm-lint lints the chart strictly and renders it with each values file of its ci/.
cmd_helm_lint() {
    local helm="$1" chart="$2" kube_version="$3" f
    "${helm}" lint --strict --kube-version "${kube_version}" "${chart}"
    for f in "${chart}"/ci/*-values.yaml; do
        echo "helm template -f ${f}"
        "${helm}" template app-controller "${chart}" --kube-version "${kube_version}" \
            --api-versions monitoring.coreos.com/v1/ServiceMonitor -f "${f}" >/dev/null
    done
}

# LINT_MODULES are the modules make lint checks, each with the packages that are ours:
# the project, the chart's tests, and the image builder of the tools module (whose other
# packages only build the Kubernetes components, etcd and kwok).
LINT_MODULES=(".:./..." "test/chart:./..." "hack/tools:./imagebuild/...")

# lint runs golangci-lint with the root's .golangci.yml in each of LINT_MODULES, and
# fails if any finds something.
cmd_lint() {
    local lint="$1" entry dir pkgs rc=0
    for entry in "${LINT_MODULES[@]}"; do
        dir="${entry%%:*}"
        pkgs="${entry#*:}"
        echo "golangci-lint run ${pkgs} (in ${dir})"
        (cd "${dir}" && "${lint}" run --config "${ROOT}/.golangci.yml" "${pkgs}") || rc=1
    done
    return "${rc}"
}

# fuzz runs each Go fuzz target (package:target) for FUZZTIME.
cmd_fuzz() {
    local fuzztime="$1" t
    shift
    for t in "$@"; do
        echo "fuzz ${t#*:} in ${t%%:*} for ${fuzztime}"
        "${GO}" test -run '^$' -fuzz "^${t#*:}\$" -fuzztime "${fuzztime}" "${t%%:*}"
    done
}

cmd="${1:?usage: make.sh test|cross|sbom|plugin-dist|manifests|helm-lint|lint|fuzz ...}"
shift
case "${cmd}" in
test) cmd_test "$@" ;;
cross) cmd_cross "$@" >/dev/null ;;
sbom) cmd_sbom "$@" ;;
plugin-dist) cmd_plugin_dist "$@" ;;
manifests) cmd_manifests "$@" ;;
helm-lint) cmd_helm_lint "$@" ;;
fuzz) cmd_fuzz "$@" ;;
lint) cmd_lint "$@" ;;
*)
    echo "make.sh: unknown command ${cmd}" >&2
    exit 2
    ;;
esac
