#!/usr/bin/env bash
# What the Makefile's targets do that takes more than one line of shell. Each target is
# one line that calls a subcommand here; the Makefile passes what it knows in the
# environment (GO, BIN, LDFLAGS, KUBECTL) and as arguments.
#
#   make.sh test STEP...                 make each STEP in order; the tools build in the
#                                        background meanwhile, in stages (TEST_TOOLS)
#   make.sh cross PKG DIR PLATFORM...    build PKG for each os/arch into DIR/os-arch/
#   make.sh sbom TOOL VERSION DIR HOST PLATFORM...
#                                        the CycloneDX SBOM of each DIR/os-arch/ binary
#   make.sh plugin-dist VERSION TEMPLATE DIST PLATFORM... -- FILE...
#                                        the krew archives and manifest of kubectl-app
#   make.sh manifests IMG                config/default, its image set to IMG
#   make.sh helm-lint HELM CHART KUBE_VERSION
#   make.sh wait-established CRD...
#                                        wait until each CRD is Established
#   make.sh fuzz FUZZTIME PKG:TARGET...
#   make.sh compat-module MINOR VERSION   write hack/tools/compat/MINOR/go.mod (and go.sum):
#                                        the control plane of k8s.io/kubernetes VERSION
#   make.sh test-compat DIR MINOR=BINDIR...
#                                        the smoke (test/compat) on each minor's control
#                                        plane, its results in DIR; prints the matrix
#   make.sh release                      every artifact of $VERSION into $RELEASE_DIST
#                                        (the settings in the environment: see cmd_release)
#   make.sh lint GOLANGCI_LINT           golangci-lint (.golangci.yml) on every module of
#                                        ours
#   make.sh prometheus VERSION OUT       Prometheus VERSION's binary from Debian's package
#   make.sh prometheus-image IMAGEBUILD LAYOUT BINARY VERSION
#                                        its image: the binary and the libraries it loads
#   make.sh slot TESTBINARY ARG...        go test's -exec in make test: runs a package that
#                                        starts a control plane or a node in one of
#                                        APP_TEST_SLOTS slots
set -o errexit -o nounset -o pipefail

CALLER_DIR="$(pwd -P)"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"
GO="${GO:-go}"
BIN="${BIN:-${ROOT}/bin}"

# The steps of `make test` that do not need the control plane binaries: they run while
# the binaries build. Every other step waits for them.
OFFLINE_STEPS=" verify unit test-image test-image-beside "

# failures repeats, after a failed step, the lines of its log (bin/test-STEP.log) that say
# which tests failed and why: a failing test's assertions are buried in its controller's
# log lines, and CI shows only the start and the end of the output. Each failing test
# gives at most its first 4 lines, those that say FAIL and its last 10 (where its
# assertions most often are), so that a long one (the soak's report) leaves room for
# the others.
failures() {
    local log="${BIN}/test-$1.log"
    echo "make test: $1 failed (its whole output is in ${log}); the failing tests and their own lines:"
    # Go's test failures and the lines the tests wrote themselves (FILE_test.go:N:),
    # without the klog lines the controllers wrote through the tests' loggers.
    grep -E '^[[:space:]]*--- FAIL|^(FAIL|panic:)|_test\.go:[0-9]+: ' "${log}" | grep -Ev '_test\.go:[0-9]+: [IWEF][0-9]{4} ' |
        awk -v logfile="${log}" '
            function flush(   i, left) {
                if (n <= 16) {
                    for (i = 1; i <= n; i++) print lines[i]
                } else {
                    for (i = 1; i <= 4; i++) print lines[i]
                    left = 0
                    for (i = 5; i <= n - 10; i++) if (lines[i] ~ /FAIL|panic/) print lines[i]; else left++
                    print "        [" left " more lines of this test in " logfile "]"
                    for (i = n - 9; i <= n; i++) print lines[i]
                }
                n = 0
            }
            /^[[:space:]]*--- FAIL|^(FAIL|panic:)/ { flush(); print; next }
            { lines[++n] = $0 }
            END { flush() }' | head -n 80 || true
}

# test makes each step in order (`make STEP PLATFORMS=$TEST_PLATFORMS`). The tools the
# steps need build in the background from the start, their log in bin/tools-build.log:
# the first steps leave a core idle while they download modules, link, run generators
# and tests. They build in stages, one after the other (TEST_TOOLS: NAME=TARGET,TARGET...
# in order); each step that needs tools (not one of OFFLINE_STEPS) waits for the stage
# TEST_STEP_NEEDS names for it (STEP=NAME; the stages before it are built by then), or
# for the last stage. On a fresh machine the integration tests so start while the
# end-to-end tier's tools still build, instead of every step starting at once at the
# end of the last build. A failed build fails the steps that wait for its stage or a
# later one, and a failed step stops everything.
#
# A step written A+B makes A and B at the same time (each on its own control plane or
# node; they mostly wait on them), each into its log, printed whole when it ends. A part
# written A,B is a lane: B after A, if A passed (B needs what A made, or must not run
# beside it). An offline part starts at once; the others once their stage is built.
cmd_test() {
    local start step rc=0
    start="$(date +%s)"
    mkdir -p "${BIN}"
    # Each stage's exit status lands in TOOLS_STATUS.NAME when it ends, the whole build's
    # in TOOLS_STATUS (each written whole, by a rename): the lanes of a step A+B wait for
    # them from their own shells.
    TOOLS_STATUS="${BIN}/.tools-build.status"
    TOOLS_PID=""
    rm -rf "${TOOLS_STATUS}" "${TOOLS_STATUS}".* "${BIN}/test-slots.log"
    export APP_TEST_SLOTS # the steps run their cluster packages in slots (cmd_slot)
    (
        trap 'kill "${mk:-}" 2>/dev/null' TERM # a failed step stops the build itself
        s=0
        : >"${BIN}/tools-build.log"
        for stage in ${TEST_TOOLS:-base=tools}; do
            name="${stage%%=*}"
            targets="${stage#*=}"
            if [ "${s}" = 0 ]; then
                echo "make test: the tools of stage ${name} ($(($(date +%s) - start))s since the start): ${targets//,/ }" >>"${BIN}/tools-build.log"
                # shellcheck disable=SC2086 # a list of targets
                "${MAKE:-make}" --no-print-directory ${targets//,/ } >>"${BIN}/tools-build.log" 2>&1 &
                mk=$!
                wait "${mk}" || s=$?
                echo "make test: the tools of stage ${name} ended, exit status ${s} ($(($(date +%s) - start))s since the start)" >>"${BIN}/tools-build.log"
            fi
            # A failed stage fails the later ones too.
            echo "${s}" >"${TOOLS_STATUS}.${name}.tmp" && mv "${TOOLS_STATUS}.${name}.tmp" "${TOOLS_STATUS}.${name}"
        done
        echo "${s}" >"${TOOLS_STATUS}.tmp" && mv "${TOOLS_STATUS}.tmp" "${TOOLS_STATUS}"
    ) &
    TOOLS_PID=$!
    prefetch >"${BIN}/prefetch.log" 2>&1 &
    for step in "$@"; do
        echo "make test: ${step} ($(($(date +%s) - start))s since the start)"
        if [[ "${step}" == *[+,]* ]]; then
            together "${start}" "${step//+/ }" || { rc=$?; break; }
            continue
        fi
        wait_tools "${start}" "${step}" || { rc=1; break; }
        "${MAKE:-make}" --no-print-directory "${step}" PLATFORMS="${TEST_PLATFORMS}" 2>&1 | tee "${BIN}/test-${step}.log" ||
            { rc=$?; failures "${step}"; break; }
    done
    # Stop the build this script started (its shell stops the make it runs), by its pid,
    # if a step failed first; else wait for it, so that make test leaves the binaries
    # built.
    if [ "${rc}" -ne 0 ] && [ ! -f "${TOOLS_STATUS}" ]; then
        kill "${TOOLS_PID}" 2>/dev/null || true
    fi
    wait "${TOOLS_PID}" 2>/dev/null || true
    slot_report
    [ "${rc}" -eq 0 ] || exit "${rc}"
    echo "make test: done ($(($(date +%s) - start))s since the start)"
}

# PREFETCH_MODULES are the modules whose dependencies make test downloads (in this order:
# what the first steps and the first stages of tools need first), for prefetch.
PREFETCH_MODULES=". hack/tools/lint hack/tools hack/tools/sbom hack/tools/docs test/chart hack/tools/argo-rollouts hack/tools/metrics-server hack/tools/soakplot hack/tools/cosign hack/tools/traefik ${PREFETCH_EXTRA:-}"

# prefetch downloads, one module after the other, the dependencies of every module of
# PREFETCH_MODULES that is there, while the first steps and the tools build. On a fresh
# machine the downloads (gigabytes of modules, at about 5 MB/s here) were a third of make
# test: each build fetched its modules when it came to them, leaving the network idle
# while the steps compiled and the cores idle while a build downloaded. The builds wait
# for a module another go command is fetching (the module cache's locks) and fetch what
# is missing themselves; a failure here fails nothing.
prefetch() {
    local dir
    for dir in ${PREFETCH_MODULES}; do
        [ -f "${dir}/go.mod" ] || continue
        echo "prefetch: ${dir} ($(date +%T))"
        (cd "${dir}" && "${GO}" mod download) || echo "prefetch: ${dir} failed; its build fetches what it needs"
    done
    echo "prefetch: done ($(date +%T))"
}

# wait_tools returns at once for an offline step; else it waits until the background
# build of the stage of tools the step needs ended (TEST_STEP_NEEDS; the last stage of
# TEST_TOOLS for a step it does not name, or names a stage not built here), and fails
# (with the build's log) if that stage failed. It works from a lane's own shell too.
wait_tools() {
    local start="$1" step="$2" status entry need="" last="" file
    [[ "${OFFLINE_STEPS}" == *" ${step} "* ]] && return 0
    for entry in ${TEST_TOOLS:-base=tools}; do last="${entry%%=*}"; done
    for entry in ${TEST_STEP_NEEDS:-}; do
        [ "${entry%%=*}" = "${step}" ] && need="${entry#*=}"
    done
    if [ -z "${need}" ] || [[ " ${TEST_TOOLS:-base=tools} " != *" ${need}="* ]]; then
        need="${last}"
    fi
    file="${TOOLS_STATUS}.${need}"
    local waited=""
    if [ ! -f "${file}" ]; then
        echo "make test: ${step} waits for the tools of stage ${need} (log in bin/tools-build.log) ($(($(date +%s) - start))s since the start)"
        waited=1
        while [ ! -f "${file}" ]; do
            if ! kill -0 "${TOOLS_PID}" 2>/dev/null && [ ! -f "${file}" ]; then
                echo "make test: the build of the tools stopped without a status" >&2
                return 1
            fi
            sleep 1
        done
    fi
    status="$(cat "${file}")"
    if [ "${status}" = 0 ] && [ -n "${waited}" ]; then
        echo "make test: the tools of stage ${need} are built, ${step} starts ($(($(date +%s) - start))s since the start)"
    elif [ "${status}" != 0 ]; then
        # Its log once, whichever lane sees the failure first.
        if mkdir "${TOOLS_STATUS}.printed" 2>/dev/null; then
            cat "${BIN}/tools-build.log"
        fi
        echo "the build of the tools of stage ${need} failed (exit status ${status}), so did ${step}" >&2
        return 1
    fi
}

# together makes the parts (a space-separated list) at the same time, each part a lane
# of steps (A,B: B after A, if A passed), each step into bin/test-STEP.log, and prints
# the logs of a lane whole as it ends. Meanwhile each package's result line (ok, FAIL,
# --- FAIL, panic) is printed as it comes, prefixed by its step, so that a run cut short
# (CI's time limit) still tells how far each step got. It waits for every lane and fails
# if any failed, after repeating the failing tests' lines of each failed step.
together() {
    local start="$1" lane step pid rc=0 failed="" log step_failed
    local -A lanes=()
    local tails=()
    for lane in $2; do
        for step in ${lane//,/ }; do
            log="${BIN}/test-${step}.log"
            rm -f "${log}"
            tail -n +1 -F "${log}" 2>/dev/null \
                > >(grep --line-buffered -E '^(ok |FAIL|--- FAIL|panic:)' | sed -u "s|^|make test: ${step}: |") &
            tails+=("$!")
        done
        (
            first=1
            for step in ${lane//,/ }; do
                : >>"${BIN}/test-${step}.log" # the step began: its log tells a failed lane's step
                wait_tools "${start}" "${step}" || exit 1
                [ -n "${first}" ] || echo "make test: ${step} ($(($(date +%s) - start))s since the start)"
                first=""
                "${MAKE:-make}" --no-print-directory "${step}" PLATFORMS="${TEST_PLATFORMS}" >>"${BIN}/test-${step}.log" 2>&1 || exit
            done
        ) &
        lanes[$!]="${lane}"
    done
    while [ "${#lanes[@]}" -gt 0 ]; do
        wait -n -p pid "${!lanes[@]}" && rc=0 || rc=$?
        lane="${lanes[${pid}]}"
        unset "lanes[${pid}]"
        echo "make test: ${lane} ended, exit status ${rc} ($(($(date +%s) - start))s since the start); its output:"
        for step in ${lane//,/ }; do
            log="${BIN}/test-${step}.log"
            [ -f "${log}" ] || continue
            cat "${log}"
            # The step that failed is the last one of the lane that ran.
            [ "${rc}" -eq 0 ] || step_failed="${step}"
        done
        [ "${rc}" -eq 0 ] || failed="${failed} ${step_failed}"
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

# wait-established waits, up to 60 s, until each CRD (a name) says Established=True.
# kubectl wait fails instead of waiting on a CRD that has no condition yet, just created
# or re-applied: --for condition=Established did, and so did --for jsonpath (`<nil> is
# not array or slice`, make install in test/e2e/tutorial); kubectl get's jsonpath prints
# nothing for a missing condition, and this asks again.
cmd_wait_established() {
    local crd status deadline
    deadline=$(($(date +%s) + 60))
    for crd in "$@"; do
        while :; do
            status="$("${KUBECTL}" get crd "${crd}" -o 'jsonpath={.status.conditions[?(@.type=="Established")].status}' 2>&1)" || true
            [ "${status}" = True ] && break
            if [ "$(date +%s)" -ge "${deadline}" ]; then
                echo "make.sh wait-established: CRD ${crd} not Established within 60 s (last: ${status:-no condition})" >&2
                return 1
            fi
            sleep 1
        done
        echo "customresourcedefinition.apiextensions.k8s.io/${crd} established"
    done
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

# release writes every artifact of VERSION into RELEASE_DIST (docs/release.md): the image
# index as an OCI layout tarball and its SBOMs, the chart, install.yaml and crds.yaml, the
# plugin's archives and krew manifest, the release notes (CHANGELOG's section of VERSION),
# and checksums.txt of them all. With REGISTRY it pushes the image and the chart there;
# with COSIGN_KEY it signs checksums.txt and, pushed, the image. The same VERSION, commit
# and REGISTRY give the same files, byte for byte: times come from SOURCE_DATE_EPOCH,
# archives are written in a fixed order (hack/reprotar), nothing records the build
# machine. The Makefile passes the settings in the environment: VERSION, RELEASE_DIST,
# REGISTRY, RELEASE_PLATFORMS, PLUGIN_PLATFORMS, CHANGELOG, SOURCE_DATE_EPOCH, HELM,
# IMAGEBUILD, COSIGN, COSIGN_KEY and COSIGN_FLAGS.
cmd_release() {
    local version="${VERSION}" dist="${RELEASE_DIST}" epoch="${SOURCE_DATE_EPOCH}"
    if [[ ! "${version}" =~ ^v([0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?)$ ]]; then
        echo "make release: VERSION=${version}: want vMAJOR.MINOR.PATCH[-PRERELEASE], e.g. VERSION=v0.1.0" >&2
        return 2
    fi
    local chart_version="${BASH_REMATCH[1]}"
    local repository="${REGISTRY:+${REGISTRY}/}app-controller"
    local plain_http=() cosign_registry=()
    case "${REGISTRY:-}" in
    127.* | localhost:* | "[::1]":*)
        # The local cluster's registry: plain HTTP on loopback.
        plain_http=(--plain-http)
        cosign_registry=(--allow-http-registry --allow-insecure-registry)
        ;;
    esac
    local section
    section="$(changelog_section "${CHANGELOG}" "${chart_version}")" || return 1
    if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
        echo "make release: warning: the tree has uncommitted changes: this release is not commit $(git rev-parse --short HEAD)'s" >&2
    fi

    rm -rf "${dist}"
    mkdir -p "${dist}"
    local work="${dist}/.build" # removed before the checksums
    echo "make release: image ${repository}:${version} (${RELEASE_PLATFORMS})"
    "${MAKE:-make}" --no-print-directory image VERSION="${version}" PLATFORMS="${RELEASE_PLATFORMS}" \
        IMG="${repository}:${version}" IMAGE_DIR="${work}/image" >/dev/null
    local digest platform
    digest="$(cat "${work}/image/index.digest")"
    "${GO}" run ./hack/reprotar tar --mtime "${epoch}" --out "${dist}/app-controller_${version}_image.oci.tar" "${work}/image/oci"
    for platform in ${RELEASE_PLATFORMS//,/ }; do
        cp "${work}/image/${platform//\//-}/sbom.cdx.json" "${dist}/app-controller_${version}_${platform//\//_}.sbom.cdx.json"
    done

    echo "make release: install.yaml and crds.yaml"
    cmd_manifests "${repository}:${version}@${digest}" >"${dist}/install.yaml"
    "${KUBECTL}" kustomize config/crd >"${dist}/crds.yaml"

    echo "make release: chart app-controller ${chart_version} (appVersion ${version}, image ${repository})"
    mkdir -p "${work}/chart"
    cp -R charts/app-controller "${work}/chart/"
    sed -i "s|^  repository: app-controller\$|  repository: ${repository}|" "${work}/chart/app-controller/values.yaml"
    "${HELM}" package "${work}/chart/app-controller" --version "${chart_version}" --app-version "${version}" -d "${dist}" >/dev/null
    # helm package stamps every file with the time of the packaging.
    "${GO}" run ./hack/reprotar retime --mtime "${epoch}" "${dist}/app-controller-${chart_version}.tgz"

    echo "make release: kubectl plugin (${PLUGIN_PLATFORMS})"
    "${MAKE:-make}" --no-print-directory plugin-dist VERSION="${version}" PLUGIN_DIST="${dist}" PLUGIN_PLATFORMS="${PLUGIN_PLATFORMS}" >/dev/null
    rm -rf "${dist}/build"

    release_notes "${version}" "${section}" "${repository}" "${digest}" "${chart_version}" >"${dist}/release-notes.md"

    if [ -n "${REGISTRY:-}" ]; then
        echo "make release: pushing the image and the chart to ${REGISTRY}"
        "${IMAGEBUILD}" push --layout "${work}/image/oci" "${repository}:${version}"
        "${HELM}" push "${dist}/app-controller-${chart_version}.tgz" "oci://${REGISTRY}/charts" "${plain_http[@]}"
    fi
    rm -rf "${work}"
    (cd "${dist}" && find . -maxdepth 1 -type f -printf '%P\n' | LC_ALL=C sort | xargs sha256sum >../.checksums.$$ && mv ../.checksums.$$ checksums.txt)

    if [ -n "${COSIGN_KEY:-}" ]; then
        echo "make release: signing checksums.txt${REGISTRY:+ and ${repository}@${digest}} with ${COSIGN_KEY}"
        # shellcheck disable=SC2086 # COSIGN_FLAGS is a list of flags
        "${COSIGN}" sign-blob --yes --key "${COSIGN_KEY}" ${COSIGN_FLAGS} \
            --bundle "${dist}/checksums.txt.sigstore.json" "${dist}/checksums.txt" >/dev/null
        if [ -n "${REGISTRY:-}" ]; then
            # shellcheck disable=SC2086
            "${COSIGN}" sign --yes --key "${COSIGN_KEY}" ${COSIGN_FLAGS} "${cosign_registry[@]}" "${repository}@${digest}"
        fi
    fi
    echo "make release: ${dist}: $(wc -l <"${dist}/checksums.txt") files in checksums.txt; image ${repository}:${version}@${digest}"
}

# changelog_section prints the section of version (without its v) of a Keep a Changelog
# file, from "## [VERSION]" up to the next "## " or the link references; it fails when
# there is none.
changelog_section() {
    local file="$1" version="$2" body
    body="$(awk -v v="${version}" '
        /^## / { on = (index($0, "## [" v "]") == 1) }
        /^\[[^]]*\]: / { on = 0 }
        on { print }' "${file}")"
    if [ -z "${body}" ]; then
        echo "make release: ${file} has no section \"## [${version}]\": write the release's changes there first" >&2
        return 1
    fi
    printf '%s\n' "${body}"
}

# release_notes prints the notes of a release: its CHANGELOG section, then where each
# artifact is and how to check it.
release_notes() {
    local version="$1" section="$2" repository="$3" digest="$4" chart_version="$5" heading
    heading="${section%%$'\n'*}"
    printf '# app-controller %s\n' "${version}"
    if [[ "${heading}" == *" - "* ]]; then
        printf '\nReleased %s.\n' "${heading##* - }"
    fi
    local body="${section#"${heading}"}"
    printf '%s\n\n' "${body#$'\n'}"
    printf '## Artifacts\n\n'
    printf -- '- Image: `%s:%s`, index `%s` (%s); also `app-controller_%s_image.oci.tar` (an OCI layout) and its CycloneDX SBOMs `app-controller_%s_<os>_<arch>.sbom.cdx.json`.\n' \
        "${repository}" "${version}" "${digest}" "${RELEASE_PLATFORMS//,/, }" "${version}" "${version}"
    if [ -n "${REGISTRY:-}" ]; then
        printf -- '- Helm chart: `helm install app-controller oci://%s/charts/app-controller --version %s`, or `app-controller-%s.tgz`.\n' "${REGISTRY}" "${chart_version}" "${chart_version}"
    else
        printf -- '- Helm chart: `app-controller-%s.tgz`.\n' "${chart_version}"
    fi
    printf -- '- `install.yaml` (everything, the image pinned by digest: `kubectl apply --server-side -f install.yaml`) and `crds.yaml` (the CRDs alone).\n'
    printf -- '- kubectl plugin: `kubectl-app_%s_<os>_<arch>.tar.gz` and the krew manifest `app.yaml`.\n' "${version}"
    printf -- '- `checksums.txt`: the sha256 of every file (`sha256sum -c checksums.txt`); its cosign signature `checksums.txt.sigstore.json` when the release is signed (docs/release.md).\n'
}

# LINT_MODULES are the modules make lint checks, each with the packages that are ours:
# the project, the chart's tests, the image builder of the tools module (whose other
# packages only build the Kubernetes components, etcd and kwok) and the soak's plotter.
LINT_MODULES=(".:./..." "test/chart:./..." "hack/tools:./imagebuild/..." "hack/tools/soakplot:./...")

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

# compat-module writes the module hack/tools/compat/MINOR that `make test-compat` builds
# the control plane of Kubernetes MINOR from: kube-apiserver, kube-controller-manager and
# kube-scheduler (its tools) of k8s.io/kubernetes VERSION, every staging module replaced
# by the release of the same patch (v0.MINOR.PATCH), as the replace block of that
# version's own go.mod lists them (there each points at ./staging/src/k8s.io/X), then
# tidied. Adding a version of the matrix, or keeping the previous default when the local
# control plane moves to a newer one, is this command and a commit of its output.
cmd_compat_module() {
    local minor="$1" version="$2" dir staging gomod
    dir="${ROOT}/hack/tools/compat/${minor}"
    [[ "${version}" == "v${minor}."* ]] || { echo "compat-module: ${version} is not a release of ${minor}" >&2; return 2; }
    staging="v0.${version#v1.}"
    gomod="$(cd "${ROOT}/hack/tools" && "${GO}" mod download -json "k8s.io/kubernetes@${version}" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')"
    [ -f "${gomod}" ] || { echo "compat-module: no go.mod of k8s.io/kubernetes@${version}" >&2; return 1; }
    mkdir -p "${dir}"
    rm -f "${dir}/go.mod" "${dir}/go.sum"
    cat >"${dir}/go.mod" <<MOD
// The control plane of Kubernetes ${minor} for make test-compat: kube-apiserver,
// kube-controller-manager and kube-scheduler of k8s.io/kubernetes ${version}, each
// staging module replaced by its ${staging} release. Written by
// hack/make.sh compat-module ${minor} ${version}: do not edit.
module github.com/app-controller/app-controller/hack/tools/compat/${minor}

go $(sed -n 's/^go //p' "${ROOT}/go.mod")

toolchain $(sed -n 's/^toolchain //p' "${ROOT}/go.mod")

tool (
	k8s.io/kubernetes/cmd/kube-apiserver
	k8s.io/kubernetes/cmd/kube-controller-manager
	k8s.io/kubernetes/cmd/kube-scheduler
)

require k8s.io/kubernetes ${version}

replace (
$(sed -n '/^replace (/,/^)/s|^\t\(k8s.io/[a-z0-9-]*\) => ./staging/.*|\t\1 => \1 '"${staging}"'|p' "${gomod}")
)
MOD
    (cd "${dir}" && "${GO}" mod tidy)
    echo "wrote ${dir}/go.mod and go.sum (k8s.io/kubernetes ${version})"
}

# test-compat runs the smoke of test/compat once per MINOR=BINDIR, on the control plane
# of BINDIR (built by `make BINDIR/kube-apiserver` first unless it is bin/ itself, which
# `make tools` built), each run's output in DIR/MINOR.log and its results in DIR/MINOR.tsv,
# one after the other (each starts a control plane of its own). Then it prints the matrix
# of version x check and each failure's message, and fails if any check failed or did
# not run.
cmd_test_compat() {
    local dir="$1" arg minor bindir kubebindir rc=0 start
    shift
    rm -rf "${dir}" && mkdir -p "${dir}"
    for arg in "$@"; do
        minor="${arg%%=*}"
        bindir="${arg#*=}"
        start="$(date +%s)"
        echo "make test-compat: Kubernetes ${minor} (binaries: ${bindir})"
        kubebindir=""
        if [ "${bindir}" != "${BIN}" ]; then
            kubebindir="${bindir}"
            if ! "${MAKE:-make}" --no-print-directory "${bindir}/kube-apiserver" >"${dir}/${minor}.log" 2>&1; then
                tail -n 20 "${dir}/${minor}.log"
                printf '#version\t%s\t\ncontrol plane\tFAIL\tbuilding the binaries failed (%s)\n' "${minor}" "${dir}/${minor}.log" >"${dir}/${minor}.tsv"
                rc=1
                continue
            fi
        fi
        APP_CONTROLLER_BIN_DIR="${BIN}" APP_CONTROLLER_KUBE_BIN_DIR="${kubebindir}" KUBE_CACHE_MUTATION_DETECTOR=true \
            APP_CONTROLLER_COMPAT_VERSION="${minor}" APP_CONTROLLER_COMPAT_RESULTS="${dir}/${minor}.tsv" \
            "${GO}" test -count=1 -v -timeout 20m ${APP_TEST_SLOTS:+-exec "${ROOT}/hack/make.sh slot"} -run '^TestSmoke$' ./test/compat/ 2>&1 | tee -a "${dir}/${minor}.log" ||
            rc=1
        if [ ! -s "${dir}/${minor}.tsv" ]; then
            printf '#version\t%s\t\ncontrol plane\tFAIL\tgo test failed before the first check (%s)\n' "${minor}" "${dir}/${minor}.log" >"${dir}/${minor}.tsv"
        fi
        echo "make test-compat: Kubernetes ${minor}: $(($(date +%s) - start))s"
    done
    compat_matrix "${dir}" "$@" || rc=1
    return "${rc}"
}

# compat_matrix prints the results of DIR/MINOR.tsv for each MINOR=... as a table of
# check x version (PASS, FAIL, or - for a check that did not run), the failures' messages
# below it, and fails if a check failed or did not run.
compat_matrix() {
    local dir="$1" arg files=()
    shift
    for arg in "$@"; do
        files+=("${dir}/${arg%%=*}.tsv")
    done
    echo
    echo "Compatibility matrix (test/compat, results in ${dir}):"
    awk -F '\t' '
        FNR == 1 { n++; col[n] = $2 ($3 != "" ? " (" $3 ")" : ""); logs[n] = FILENAME; sub(/\.tsv$/, ".log", logs[n]); next }
        { if (!($1 in seen)) { seen[$1] = 1; rows[++m] = $1 } cell[$1, n] = $2; msg[$1, n] = $3 }
        END {
            w = 20
            printf "%-" w "s", "check"
            for (j = 1; j <= n; j++) printf "  %-16s", col[j]
            printf "\n"
            for (i = 1; i <= m; i++) {
                printf "%-" w "s", rows[i]
                for (j = 1; j <= n; j++) {
                    c = cell[rows[i], j]
                    if (c == "") c = "-"
                    printf "  %-16s", c
                    if (c != "PASS") bad = 1
                }
                printf "\n"
            }
            for (i = 1; i <= m; i++) for (j = 1; j <= n; j++)
                if (cell[rows[i], j] == "FAIL") {
                    text = msg[rows[i], j]
                    if (length(text) > 1500) text = substr(text, 1, 1500) " ... (the whole message: " logs[j] ")"
                    printf "FAIL %s, %s: %s\n", col[j], rows[i], text
                }
            exit bad
        }' "${files[@]}"
}

# prometheus writes to OUT the prometheus binary of Debian's package, which must be of
# upstream VERSION (2.42.0: bookworm's): downloaded with apt-get download and unpacked
# with dpkg-deb, not installed, since the package's postinst starts the server as a
# system service on every address's port 9090, and it pulls in the web UI's JavaScript
# libraries, which the tests do not use. apt-get update first (root) if apt knows no
# candidate.
cmd_prometheus() {
    local want="$1" out="$2" version tmp
    command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
        { echo "make prometheus: needs Debian's apt-get and dpkg-deb (Prometheus ${want} is Debian's package)" >&2; return 1; }
    version="$(apt-cache policy prometheus 2>/dev/null | awk '/Candidate:/ {print $2}')"
    if [ -z "${version}" ] || [ "${version}" = "(none)" ]; then
        [ "$(id -u)" = 0 ] || { echo "make prometheus: apt knows no prometheus package: run apt-get update as root" >&2; return 1; }
        apt-get update -qq
        version="$(apt-cache policy prometheus 2>/dev/null | awk '/Candidate:/ {print $2}')"
    fi
    [[ "${version}" == "${want}+"* ]] ||
        { echo "make prometheus: Debian's prometheus is ${version:-missing}, not ${want} (PROMETHEUS_VERSION in the Makefile)" >&2; return 1; }
    tmp="$(mktemp -d)"
    chmod 0777 "${tmp}" # apt-get download writes as the user _apt
    if ! (cd "${tmp}" && apt-get download -qq "prometheus=${version}") ||
        ! dpkg-deb -x "${tmp}"/prometheus_*.deb "${tmp}/root"; then
        rm -rf "${tmp}"
        echo "make prometheus: downloading and unpacking Debian's prometheus ${version} failed" >&2
        return 1
    fi
    mkdir -p "$(dirname "${out}")"
    install -m 0755 "${tmp}/root/usr/bin/prometheus" "${out}"
    rm -rf "${tmp}"
    echo "$("${out}" --version 2>&1 | head -n 1), from Debian's prometheus ${version}, at ${out}"
}

# prometheus-image writes to LAYOUT the image prometheus:VERSION of BINARY (entrypoint
# /bin/prometheus). Debian builds it dynamically linked (libc, for cgo's user and DNS
# lookups), so the image also holds the dynamic loader and each library that ldd says it
# loads, at the paths the binary asks for (PT_INTERP) and the loader searches (Debian's
# multiarch /lib/<triplet>), copied from this machine: the same Debian libc the package
# depends on.
cmd_prometheus_image() {
    local imagebuild="$1" layout="$2" binary="$3" version="$4" arch line lib files=()
    arch="$("${GO}" env GOARCH)"
    while read -r line; do
        case "${line}" in
        *" => /"*) lib="${line#* => }" && lib="${lib%% (*}" ;; # libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)
        /*) lib="${line%% (*}" ;;                              # /lib64/ld-linux-x86-64.so.2 (0x...)
        *) continue ;;                                          # linux-vdso.so.1 (0x...)
        esac
        files+=(--executable "${lib}=$(readlink -f "${lib}")")
    done < <(ldd "${binary}")
    [ "${#files[@]}" -gt 0 ] || { echo "make.sh prometheus-image: ldd lists no library of ${binary}" >&2; return 1; }
    "${imagebuild}" build --layout "${layout}" --tag "prometheus:${version}" --platform "linux/${arch}=${binary}" \
        --entrypoint /bin/prometheus "${files[@]}" --created-epoch 0 --version "${version}" \
        --revision "debian:prometheus_$("${binary}" --version 2>&1 | sed -n 's/.*revision: \([^)]*\)).*/\1/p')" \
        --source https://packages.debian.org/bookworm/prometheus >/dev/null
}

# slot runs a test binary (go test -exec: TESTBINARY ARG..., from the package's
# directory) once it holds one of TEST_SLOTS slots (flock on bin/.test-slots/N), shared
# by every step of make test: at most TEST_SLOTS packages that start a control plane or
# a node run at once, however many steps run together. On 2 cores, 6 to 8 of them at
# once (every step at the same time, each step's own -p) ran at a load of 30-64, and
# API servers that took over 90 s to restart and Prometheus queries that timed out
# failed tests that pass alone; the machine is as busy with fewer of them, each ending
# sooner. A package of SLOT_WIDE holds two slots: at most one other runs beside it.
# While it waits for its second slot it holds bin/.test-slots/gate, which every other
# package takes (shared) to claim a slot: the slots that end go to it, not to the
# packages that asked after it. A line per package in bin/test-slots.log: how long it
# waited and ran, and the CPU seconds of it and the processes it waited for (make test
# prints them by CPU).
#
# SLOT_WIDE: test/e2e/analysis runs six rollouts at once, each with an open-loop load
# through Traefik, and Prometheus scraping every 2 s: alone it keeps 1.5 to 2 of the 2
# CPUs busy (measured: the machine's and the node cgroup's cpuacct.usage), and beside
# two other packages in CI its load pods and Traefik fell so far behind that requests
# waited 30 s and a canary got no request for a minute.
SLOT_WIDE=(test/e2e/analysis)
cmd_slot() {
    local dir="${BIN}/.test-slots" slots="${APP_TEST_SLOTS:-1}" pkg asked ran rc=0 child want=1 gate
    local held=() fds=()
    pkg="${CALLER_DIR#"${ROOT}"/}"
    mkdir -p "${dir}"
    if [[ " ${SLOT_WIDE[*]} " == *" ${pkg} "* ]] && [ "${slots}" -gt 1 ]; then
        want=2
    fi
    asked="$(date +%s)"
    exec {gate}>>"${dir}/gate"
    if [ "${want}" -gt 1 ]; then
        flock "${gate}" # no other package claims a slot until this one holds its two
    fi
    while [ "${#held[@]}" -lt "${want}" ]; do
        # A narrow package claims a slot only while no wide one waits.
        if [ "${want}" -gt 1 ] || flock -s -n "${gate}"; then
            claim_slots
            [ "${want}" -gt 1 ] || flock -u "${gate}"
        fi
        [ "${#held[@]}" -ge "${want}" ] || sleep 2
    done
    exec {gate}>&-
    ran="$(date +%s)"
    # The slots' locks stay with this shell: the test and what it starts do not hold them
    # (a leftover daemon would keep a slot forever).
    (
        for fd in "${fds[@]}"; do exec {fd}>&-; done
        cd "${CALLER_DIR}" && exec "$@"
    ) &
    child=$!
    trap 'kill -TERM "${child}" 2>/dev/null' TERM INT
    trap 'kill -QUIT "${child}" 2>/dev/null' QUIT
    while :; do
        wait "${child}" && rc=0 || rc=$?
        kill -0 "${child}" 2>/dev/null || break # a trapped signal ended the wait, not the test
    done
    # times in this shell (not in a $(...) subshell, which has no children): the second
    # line is the CPU of the children it waited for.
    local cpu
    times >"${dir}/times.$$"
    cpu="$(awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%.0f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "${dir}/times.$$")"
    rm -f "${dir}/times.$$"
    printf '%s\t%s\twaited %ss\tran %ss\tcpu %ss\texit %s\n' "$(date +%T)" "${pkg}" "$((ran - asked))" \
        "$(($(date +%s) - ran))" "${cpu}" "${rc}" >>"${BIN}/test-slots.log"
    return "${rc}"
}

# claim_slots (cmd_slot's) locks free slots until it holds want of them: held are the
# slots' numbers, fds their locks' file descriptors.
claim_slots() {
    local i fd
    for ((i = 0; i < slots && ${#held[@]} < want; i++)); do
        [[ " ${held[*]-} " == *" ${i} "* ]] && continue
        exec {fd}>>"${dir}/${i}"
        if flock -n "${fd}"; then
            held+=("${i}")
            fds+=("${fd}")
        else
            exec {fd}>&-
        fi
    done
}

# slot_report prints bin/test-slots.log's packages by CPU seconds, the most first.
slot_report() {
    [ -s "${BIN}/test-slots.log" ] || return 0
    echo "make test: the packages run in slots (TEST_SLOTS=${APP_TEST_SLOTS:-}), by CPU seconds (theirs and their processes'):"
    sort -t $'\t' -k5.5,5nr "${BIN}/test-slots.log" | awk -F '\t' '{ printf "make test:   %-34s %-12s %-10s %-10s %s\n", $2, $5, $4, $3, $6 }'
    awk -F '\t' '{ split($5, c, " "); sub(/s$/, "", c[2]); n += c[2] } END { printf "make test:   %d CPU seconds in all\n", n }' "${BIN}/test-slots.log"
}

cmd="${1:?usage: make.sh test|cross|sbom|plugin-dist|manifests|helm-lint|lint|release|fuzz|compat-module|test-compat|prometheus|prometheus-image|slot|wait-established ...}"
shift
case "${cmd}" in
test) cmd_test "$@" ;;
cross) cmd_cross "$@" >/dev/null ;;
sbom) cmd_sbom "$@" ;;
plugin-dist) cmd_plugin_dist "$@" ;;
manifests) cmd_manifests "$@" ;;
helm-lint) cmd_helm_lint "$@" ;;
wait-established) cmd_wait_established "$@" ;;
fuzz) cmd_fuzz "$@" ;;
compat-module) cmd_compat_module "$@" ;;
test-compat) cmd_test_compat "$@" ;;
lint) cmd_lint "$@" ;;
release) cmd_release "$@" ;;
prometheus) cmd_prometheus "$@" ;;
prometheus-image) cmd_prometheus_image "$@" ;;
slot) cmd_slot "$@" ;;
*)
    echo "make.sh: unknown command ${cmd}" >&2
    exit 2
    ;;
esac
