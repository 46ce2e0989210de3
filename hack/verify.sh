#!/usr/bin/env bash
# Fails when anything generated is stale, when code is not gofmt-clean, when go vet or
# golangci-lint ($GOLANGCI_LINT, make lint) complains, when a go.mod is not tidy, or when the apply configuration externals of
# update-codegen.sh do not match the API. Regenerates into a clean copy of the tree (git
# archive of the tracked and not-ignored files) so the working tree is never modified.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"
failed=0

# golangci-lint runs last; its first build (about 2 CPU minutes and the modules of
# hack/tools/lint) runs meanwhile, beside the checks below, instead of before them:
# $LINT_BUILD is the command that builds it (make verify passes its make rule), its
# output in bin/lint-build.log.
lint_build_pid=""
if [ -n "${LINT_BUILD:-}" ]; then
    mkdir -p "${ROOT}/bin"
    ${LINT_BUILD} >"${ROOT}/bin/lint-build.log" 2>&1 &
    lint_build_pid=$!
fi

echo "verify: gofmt"
unformatted="$(gofmt -l $(git ls-files --cached --others --exclude-standard '*.go'))"
if [ -n "${unformatted}" ]; then
    echo "gofmt would change:" >&2
    echo "${unformatted}" >&2
    failed=1
fi

echo "verify: go vet"
go vet ./... || failed=1
# The tools module's own code (the image builder); the packages it only builds are not ours.
(cd hack/tools && go vet ./imagebuild/...) || failed=1
(cd test/chart && go vet ./...) || failed=1
(cd hack/tools/soakplot && go vet ./...) || failed=1

echo "verify: go.mod tidy"
# hack/tools/traefik is left out: tidying it downloads Traefik's 2.6 GB of modules (make e2e-traffic).
# So are the modules of hack/tools/compat (about 700 MB and 1.5 minutes of downloads each):
# the build of each checks its own (make test-compat; make test builds the oldest).
# hack/tools/argo-rollouts is in (half a second with its modules in the cache; on a fresh machine
# its 350 MB of module zips, which make test's background build of it downloads anyway).
for dir in . hack/tools hack/tools/docs hack/tools/metrics-server hack/tools/sbom hack/tools/soakplot hack/tools/lint hack/tools/cosign hack/tools/argo-rollouts test/chart; do
    if ! (cd "${dir}" && go mod tidy -diff >/dev/null); then
        echo "${dir}/go.mod is not tidy: run 'go mod tidy' in ${dir}" >&2
        failed=1
    fi
done

echo "verify: supply chain (LICENSE, SECURITY.md, toolchain lines, Dockerfile digests)"
./hack/verify-supply-chain.sh || failed=1

echo "verify: apply configuration externals"
# hack/applyconfig-externals.txt must list exactly the k8s.io/api struct types that the
# API's types*.go files name: one missing makes the generated apply configuration hold
# the plain API type, one extra is a stale entry.
api_types=(pkg/apis/appcontroller/v1/types*.go)
go mod download k8s.io/api
k8s_api_dir="$(go list -m -f '{{.Dir}}' k8s.io/api)"
named="$(
    for api_file in "${api_types[@]}"; do
        sed -n 's|^[[:space:]]*\([a-z0-9]*\) "k8s.io/api/\([a-z0-9.]*/v[0-9a-z]*\)"$|\1 \2|p' "${api_file}" |
            while read -r alias group_version; do
                grep -oE "\b${alias}\.[A-Z][A-Za-z0-9]*" "${api_file}" | sort -u | while read -r ref; do
                    type="${ref#*.}"
                    if grep -q "^type ${type} struct" "${k8s_api_dir}/${group_version}"/*.go; then
                        echo "${group_version}.${type}"
                    fi
                done
            done
    done | sort -u
)"
listed="$(grep -v -e '^#' -e '^$' hack/applyconfig-externals.txt | sort -u)"
if [ "${named}" != "${listed}" ]; then
    echo "hack/applyconfig-externals.txt does not match the k8s.io/api struct types pkg/apis/appcontroller/v1/types*.go name:" >&2
    diff <(echo "${listed}") <(echo "${named}") | sed -n 's/^</  listed, not named: /p; s/^>/  named, not listed: /p' >&2
    failed=1
fi

echo "verify: generated code"
# Regenerating takes minutes; skip it when neither the generators' inputs nor the
# generated files changed since the last run that found them up to date (the stamp is
# a hash of every file under the paths below, tracked or not, and of the Go version).
stamp="${ROOT}/bin/.verify-generated"
inputs_hash() {
    { git ls-files -z --cached --others --exclude-standard -- \
        pkg cmd internal hack config charts artifacts/example docs/reference go.mod go.sum |
        sort -z | xargs -0 sha256sum; go version; } | sha256sum | cut -d' ' -f1
}
hash="$(inputs_hash)"
if [ -f "${stamp}" ] && [ "$(cat "${stamp}")" = "${hash}" ]; then
    echo "verify: generated code unchanged since the last verify (${stamp}): not regenerated"
else
    tmp="$(mktemp -d)"
    trap 'rm -rf "${tmp}"' EXIT
    # A clean copy of the tree as it is: the tracked files and the untracked ones git
    # does not ignore, written to a tree object through a scratch index (the real index
    # and the working tree are left alone) and extracted with git archive.
    scratch_index="${tmp}/index"
    cp "$(git rev-parse --git-path index)" "${scratch_index}"
    GIT_INDEX_FILE="${scratch_index}" git add --all
    tree="$(GIT_INDEX_FILE="${scratch_index}" git write-tree)"
    mkdir "${tmp}/tree"
    git archive --format=tar "${tree}" | tar -x -C "${tmp}/tree"
    # The generators built by an earlier run (bin/codegen), so as not to build them again.
    if [ -d "${ROOT}/bin/codegen" ]; then
        mkdir -p "${tmp}/tree/bin" && cp -r "${ROOT}/bin/codegen" "${tmp}/tree/bin/"
    fi
    (cd "${tmp}/tree" && ./hack/update-codegen.sh >/dev/null)
    generated_ok=1
    for path in pkg/apis pkg/generated config/crd config/rbac config/samples charts/app-controller/files docs/reference; do
        if ! diff -r "${ROOT}/${path}" "${tmp}/tree/${path}" >"${tmp}/diff"; then
            echo "generated code in ${path} is stale: run 'make generate'" >&2
            # Each stale file by name, then the start of the differences.
            diff -rq "${ROOT}/${path}" "${tmp}/tree/${path}" | sed "s|${ROOT}/||; s|${tmp}/tree/|regenerated |; s|^|  |" >&2 || true
            head -40 "${tmp}/diff" >&2
            generated_ok=0
        fi
    done
    if [ "${generated_ok}" -eq 1 ]; then
        mkdir -p "$(dirname "${stamp}")" && echo "${hash}" >"${stamp}"
    else
        rm -f "${stamp}"
        failed=1
    fi
fi

echo "verify: golangci-lint"
if [ -n "${lint_build_pid}" ] && ! wait "${lint_build_pid}"; then
    cat "${ROOT}/bin/lint-build.log" >&2
    echo "building golangci-lint failed" >&2
    failed=1
else
    ./hack/make.sh lint "${GOLANGCI_LINT:-${ROOT}/bin/golangci-lint}" || failed=1
fi

if [ "${failed}" -ne 0 ]; then
    echo "verify: FAILED" >&2
    exit 1
fi
echo "verify: OK"
