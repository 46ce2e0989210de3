#!/usr/bin/env bash
# Part of make verify (hack/verify.sh): fails when the repository lacks what its supply
# chain promises (SECURITY.md, docs/security.md "Supply chain"): the LICENSE
# (Apache-2.0) and SECURITY.md, a `toolchain` line of the same Go version in every
# go.mod, and base images of the Dockerfile either pinned by digest or marked
# "unpinned:" with the reason.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"
failed=0

if ! grep -q "Apache License" LICENSE 2>/dev/null || ! grep -q "Version 2.0, January 2004" LICENSE; then
    echo "LICENSE is missing or is not the Apache License 2.0" >&2
    failed=1
fi
if [ ! -s SECURITY.md ]; then
    echo "SECURITY.md is missing" >&2
    failed=1
fi

toolchains=""
for mod in go.mod hack/tools/go.mod hack/tools/docs/go.mod hack/tools/metrics-server/go.mod hack/tools/sbom/go.mod hack/tools/soakplot/go.mod hack/tools/lint/go.mod hack/tools/cosign/go.mod hack/tools/argo-rollouts/go.mod test/chart/go.mod hack/tools/compat/*/go.mod; do
    if [ ! -f "${mod}" ]; then
        echo "${mod} is missing" >&2
        failed=1
        continue
    fi
    t="$(sed -n 's/^toolchain \(go[0-9.]*\)$/\1/p' "${mod}")"
    if [ -z "${t}" ]; then
        echo "${mod} has no toolchain line (toolchain goX.Y.Z)" >&2
        failed=1
    fi
    toolchains="${toolchains} ${t}"
done
if [ "$(echo "${toolchains}" | tr ' ' '\n' | sed '/^$/d' | sort -u | wc -l)" -gt 1 ]; then
    echo "the go.mod files name different toolchains:${toolchains}" >&2
    failed=1
fi

# Every FROM of the Dockerfile names image@sha256:<digest>, or the line before it says
# why not ("# unpinned: ...").
prev=""
while IFS= read -r line; do
    if [[ "${line}" =~ ^FROM[[:space:]] ]] && [[ ! "${line}" =~ @sha256:[0-9a-f]{64} ]] && [[ "${prev}" != "# unpinned:"* ]]; then
        echo "Dockerfile: '${line}' is not pinned by digest (image@sha256:...) and not marked '# unpinned: <why>'" >&2
        failed=1
    fi
    prev="${line}"
done <Dockerfile

exit "${failed}"
