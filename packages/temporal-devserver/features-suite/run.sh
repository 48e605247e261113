#!/usr/bin/env bash
# Runs the TypeScript features of Temporal's cross-SDK feature suite (github.com/temporalio/features)
# against this dev server, one feature at a time, and prints PASS/FAIL per feature.
#
#   packages/temporal-devserver/features-suite/run.sh <features checkout> [memory | postgres://...] [feature dir...]
#
# The checkout is prepared once: the SDK pinned to this project's 1.24.0 with one protobufjs 8 copy,
# dependencies installed from npm, the features compiled. Logs go to <checkout>/.devserver-run/.
set -uo pipefail
FEATURES=$(cd "${1:?usage: run.sh <features checkout> [memory|postgres-url] [feature...]}" && pwd); shift
MODE=${1:-memory}; [ $# -gt 0 ] && shift
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
PORT=${FEATURES_SERVER_PORT:-7599}
PROXY_PORT=$((PORT - 1))
LOGS="$FEATURES/.devserver-run"; mkdir -p "$LOGS"
cd "$FEATURES"

if [ ! -d tslib ]; then
  node -e '
    const fs = require("fs"); const p = JSON.parse(fs.readFileSync("package.json"));
    for (const k of Object.keys(p.dependencies)) if (k.startsWith("@temporalio/")) p.dependencies[k] = "1.24.0";
    p.dependencies.protobufjs = "8.8.1"; p.overrides = { protobufjs: "8.8.1" };
    fs.writeFileSync("package.json", JSON.stringify(p, null, 2));'
  rm -f package-lock.json
  npm install --no-audit --no-fund >"$LOGS/install.log" 2>&1 || { echo "npm install failed: $LOGS/install.log"; exit 1; }
  npx tsc --build >"$LOGS/build.log" 2>&1 || { echo "build failed: $LOGS/build.log"; exit 1; }
  # The compiled features import @temporalio/harness, and the proxy features fork themselves with
  # tsconfig-paths: both must reach the compiled harness.
  mkdir -p node_modules/@temporalio/harness
  echo "module.exports = require('../../../tslib/harness/ts/harness.js');" >node_modules/@temporalio/harness/index.js
  echo '{"compilerOptions":{"baseUrl":".","paths":{"@temporalio/harness":["tslib/harness/ts/harness.js"]}}}' >tsconfig.run.json
fi
export TS_NODE_PROJECT="$FEATURES/tsconfig.run.json"

DB=(); [ "$MODE" != memory ] && DB=(--db "$MODE")
node "$ROOT/bin/temporal-devserver" --port "$PORT" --headless "${DB[@]}" >"$LOGS/devserver.log" 2>&1 &
SERVER=$!
node "$HERE/connect-proxy.js" "$PROXY_PORT" proxy-user:proxy-pass >"$LOGS/proxy.log" 2>&1 &
PROXY=$!
trap 'kill $SERVER $PROXY 2>/dev/null' EXIT
sleep 3

# The poll-on-shutdown feature checks what the namespace announces, as the suite's own runner passes it.
FEATURE_NAMESPACE_CAPABILITIES=$(node -e "
  const { Connection } = require('@temporalio/client');
  Connection.connect({ address: '127.0.0.1:$PORT' }).then(async (c) => {
    const d = await c.workflowService.describeNamespace({ namespace: 'default' });
    console.log(JSON.stringify(d.namespaceInfo.capabilities)); await c.close(); });")
export FEATURE_NAMESPACE_CAPABILITIES

LIST=("$@"); [ ${#LIST[@]} -eq 0 ] && LIST=($(find tslib/features -name feature.js | sed 's|^tslib/features/||;s|/feature.js$||' | sort))
pass=0
for f in "${LIST[@]}"; do
  log="$LOGS/${f//\//-}.log"
  if timeout 180 node tslib/harness/ts/main.js --server "127.0.0.1:$PORT" --namespace default \
      --http-proxy-url "http://127.0.0.1:$PROXY_PORT" "$f:tq-${f//\//-}-$RANDOM" >"$log" 2>&1; then
    echo "PASS $f"; pass=$((pass + 1))
  else
    echo "FAIL $f ($log)"
  fi
done
echo "$pass of ${#LIST[@]} passed"
