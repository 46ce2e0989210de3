#!/usr/bin/env bash
# Fails when anything generated is stale, when code is not gofmt-clean, when go vet
# complains, or when a go.mod is not tidy. Regenerates into a copy of the tree so the
# working tree is never modified.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"
failed=0

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

echo "verify: go.mod tidy"
for dir in . hack/tools hack/tools/docs test/chart; do
    if ! (cd "${dir}" && go mod tidy -diff >/dev/null); then
        echo "${dir}/go.mod is not tidy: run 'go mod tidy' in ${dir}" >&2
        failed=1
    fi
done

echo "verify: generated code"
# Regenerating takes minutes; skip it when neither the generators' inputs nor the
# generated files changed since the last run that found them up to date (the stamp is
# a hash of every file under the paths below, tracked or not, and of the Go version).
stamp="${ROOT}/bin/.verify-generated"
inputs_hash() {
    { git ls-files -z --cached --others --exclude-standard -- \
        pkg cmd hack config charts docs/api.md go.mod go.sum |
        sort -z | xargs -0 sha256sum 2>&1; go version; } | sha256sum | cut -d' ' -f1
}
hash="$(inputs_hash)"
if [ -f "${stamp}" ] && [ "$(cat "${stamp}")" = "${hash}" ]; then
    echo "verify: generated code unchanged since the last verify (${stamp}): not regenerated"
else
    tmp="$(mktemp -d)"
    trap 'rm -rf "${tmp}"' EXIT
    # Copy the tracked and untracked-but-not-ignored files, then regenerate in the copy.
    git ls-files -z --cached --others --exclude-standard | xargs -0 -I{} cp --parents {} "${tmp}/" 2>/dev/null || true
    mkdir -p "${tmp}/bin" && cp -r "${ROOT}/bin/codegen" "${tmp}/bin/" 2>/dev/null || true
    (cd "${tmp}" && ./hack/update-codegen.sh >/dev/null)
    generated_ok=1
    for path in pkg/apis pkg/generated config/crd config/rbac charts/app-controller/files docs/api.md; do
        if ! diff -r "${ROOT}/${path}" "${tmp}/${path}" >/dev/null 2>&1; then
            echo "generated code in ${path} is stale: run 'make generate'" >&2
            diff -r "${ROOT}/${path}" "${tmp}/${path}" | head -40 >&2 || true
            generated_ok=0
        fi
    done
    if [ "${generated_ok}" -eq 1 ]; then
        mkdir -p "$(dirname "${stamp}")" && echo "${hash}" > "${stamp}"
    else
        rm -f "${stamp}"
        failed=1
    fi
fi

if [ "${failed}" -ne 0 ]; then
    echo "verify: FAILED" >&2
    exit 1
fi
echo "verify: OK"
