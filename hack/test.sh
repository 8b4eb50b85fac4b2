#!/usr/bin/env bash
# Runs every Go test of the module in three streams at once, so that the
# long end-to-end suites wait on their clusters beside each other instead
# of one after another: test/e2e's AWS provider suite (TestAWS*, the suite
# the IAM rule-removal proof needs whole), the rest of test/e2e, and every
# other package; then TestAWSBatchedScaleUp alone. Each stream prints its
# output as it comes, its lines prefixed with its name; the script fails
# when any stream fails.
#
# -count=1: the e2e tests run binaries they build themselves, which the
# test cache cannot see, so a cached pass could hide a regression.
set -uo pipefail
cd "$(dirname "$0")/.."

flags=(-count=1 -timeout 40m ${GO_TEST_FLAGS:-})
others=$(go list ./... | grep -v '/test/e2e$')

# Every test binary is compiled first (-exec true runs none of them), so
# the streams start from the build cache and the end-to-end suites' local
# AWS and control planes do not share the two cores with the compiler.
go test -count=1 -exec /bin/true ./... >/dev/null || { go test -count=1 -exec /bin/true ./...; exit 1; }

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

stream() {
	local name=$1
	shift
	local start=$SECONDS
	go test "$@" 2>&1 | sed -u "s/^/[$name] /" | tee "$logs/$name.log"
	local rc=${PIPESTATUS[0]}
	echo "[$name] finished in $((SECONDS - start))s, exit $rc"
	return "$rc"
}

stream e2e-aws "${flags[@]}" -run '^TestAWS' -skip '^TestAWSBatchedScaleUp$' ./test/e2e &
aws=$!
stream e2e "${flags[@]}" -skip '^TestAWS' ./test/e2e &
e2e=$!
# shellcheck disable=SC2086 # one argument per package
stream packages "${flags[@]}" $others &
pkgs=$!

rc=0
for pid in $aws $e2e $pkgs; do
	wait "$pid" || rc=1
done

# 600 NodeClaims launched at once through the local AWS: moto (one Python
# process) needs both cores for it, and beside the streams above it answers
# too slowly for the test's 10-minute bound, so it runs alone.
stream e2e-batch "${flags[@]}" -run '^TestAWSBatchedScaleUp$' ./test/e2e || rc=1

# A CI log is often read from its end: the failed tests and what their
# test files reported come last, one short line each.
if [ "$rc" -ne 0 ]; then
	echo "=== failures"
	cat "$logs"/*.log | grep -E -e '--- FAIL|^\[[a-z0-9-]+\] +[A-Za-z0-9_]+_test\.go:[0-9]+:|^\[[a-z0-9-]+\] (FAIL|panic:)' |
		cut -c1-240 | tail -n 80
fi
exit $rc
