#!/usr/bin/env bash
# System packages the tests need beyond Python: headless Chromium for the browser tests.
# Installs only what is missing; needs root (CI runs as root) and Debian's apt.
set -uo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup-system: installing ${need[*]}"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null \
      || echo "setup-system: could not install ${need[*]}; browser tests will be skipped with a reason"
  else
    echo "setup-system: ${need[*]} missing and cannot be installed here; browser tests will be skipped"
  fi
fi
