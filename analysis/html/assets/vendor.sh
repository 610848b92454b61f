#!/usr/bin/env bash
# Refreshes vendor/echarts.min.js from the version pinned in package-lock.json, and records its
# sha256 in vendor/echarts.min.js.sha256 (CMake checks the file against it before embedding).
# Needs node/npm and the registry; the build and CI need neither: the dist file is committed.
# To upgrade: edit the version in package.json, `npm install --package-lock-only`, run this.
set -euo pipefail
cd "$(dirname "$0")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp package.json package-lock.json "$work/"
(cd "$work" && npm ci --ignore-scripts --no-audit --no-fund >/dev/null)
version=$(node -p "require('$work/node_modules/echarts/package.json').version")
mkdir -p vendor
cp "$work/node_modules/echarts/dist/echarts.min.js" vendor/echarts.min.js
cp "$work/node_modules/echarts/LICENSE" vendor/ECHARTS-LICENSE
(cd vendor && sha256sum echarts.min.js > echarts.min.js.sha256)
echo "echarts $version: $(cat vendor/echarts.min.js.sha256)"
