#!/usr/bin/env bash
# One line per system piece this machine lacks, with what it costs and the command that
# installs it (scripts/setup.sh runs it last). `nevis doctor` says what the service does
# without each; the tests that need one name it in one line at the end of a run. Exit 0.
set -uo pipefail
have() { command -v "$1" >/dev/null 2>&1; }
missing() { echo "Missing: $1 ($2). Install it with: sudo apt-get install $3" >&2; }
have bwrap \
  || missing bubblewrap "learner code runs without a sandbox; the sandbox tests fail" "bubblewrap"
[[ "$(/sbin/ldconfig -p 2>/dev/null)" == *libseccomp.so.2* ]] \
  || missing libseccomp "learner hosts run without their system-call filter" "libseccomp2"
{ have chromium && have chromedriver; } \
  || missing "chromium and chromedriver" "the dashboard's browser tests fail" "chromium chromium-driver"
{ have podman && have runc && have debootstrap; } \
  || missing "podman, runc and debootstrap" "the container image tests (-m images) fail" "podman runc debootstrap"
{ have initdb || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; } \
  || missing "the PostgreSQL server" "with no server at NEVIS_TEST_POSTGRES_URL the PostgreSQL tests fail" "postgresql"
exit 0
