'use strict';
// Runs the compiled dev server from dist/, or its TypeScript sources (transpiled on load with the
// dev dependency @swc/core) when TEMPORAL_DEVSERVER_FROM_SOURCE is set or nothing is compiled yet.
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const compiled = path.join(root, 'dist', 'cli.js');

function registerTypeScript() {
  const swc = require('@swc/core');
  require.extensions['.ts'] = (module, filename) => {
    const source = fs.readFileSync(filename, 'utf8');
    const { code } = swc.transformSync(source, {
      filename,
      sourceMaps: 'inline',
      jsc: { parser: { syntax: 'typescript' }, target: 'es2022' },
      module: { type: 'commonjs' },
    });
    module._compile(code, filename);
  };
}

module.exports = function launch(dialect) {
  let cli;
  if (process.env.TEMPORAL_DEVSERVER_FROM_SOURCE || !fs.existsSync(compiled)) {
    registerTypeScript();
    cli = require(path.join(root, 'src', 'cli.ts'));
  } else {
    cli = require(compiled);
  }
  cli.run(dialect);
};
