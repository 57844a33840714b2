#!/usr/bin/env bash
# Runs every Jest suite and ends with one line "N passed, N failed, N skipped" computed from
# Jest's JSON results (CI reads that line, not Jest's own summary). Extra arguments go to Jest.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p test-results
# One file per run, so runs in parallel do not read each other's results.
results=$(mktemp test-results/jest-XXXXXX.json)
# --forceExit: a suite that leaves a handle open (a socket lingering after its server closed)
# must not hang the run (Jest runs the suites in worker processes, at least two at once, each
# replaced when it holds too much memory: jest.config.js).
node --experimental-vm-modules node_modules/jest/bin/jest.js --json --forceExit --outputFile="$results" "$@"
status=$?
trap 'rm -f "$results"' EXIT
if [ ! -s "$results" ]; then
  echo "jest wrote no results (exit $status)"
  echo "0 passed, 1 failed"
  exit 1
fi
node -e '
const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
// A suite that failed to load counts as a failure even though it ran no test.
const failed = r.numFailedTests + r.numRuntimeErrorTestSuites;
const skipped = r.numPendingTests + r.numTodoTests;
console.log(`${r.numPassedTests} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed > 0 || r.numPassedTests === 0 ? 1 : 0);
' "$results"
summary=$?
[ "$status" -ne 0 ] && exit "$status"
exit "$summary"
