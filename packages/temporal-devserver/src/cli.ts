/**
 * Command line of the dev server, in two dialects:
 *
 *   temporal-devserver [--port N] [--host H] [--db postgres-url] [--schema S] [--namespace NS]...
 *                      [--time-skipping] [--log-level L] [--ui-port N] [--headless]
 *                      [--max-connections N] [--max-connections-per-client N]
 *
 * The Web UI listens on 127.0.0.1, port --ui-port (default --port + 1000), as `temporal server
 * start-dev` does; --headless (or --ui-port 0) leaves it out.
 *   temporal-devserver-test <port> [--enable-time-skipping]
 *
 * The second is how @temporalio/testing launches a time-skipping test server: the port as the only
 * argument, time skipping available but locked until the test client unlocks it.
 */
import { parseArgs } from 'node:util';
import pino from 'pino';
import { startDevServer, type DevServer, type DevServerOptions } from './index';

const USAGE = `usage: temporal-devserver [--port N] [--host H] [--db postgres-url] [--schema name]
                          [--namespace name]... [--time-skipping] [--log-level level]
                          [--ui-port N] [--headless]
                          [--max-connections N] [--max-connections-per-client N]`;

function parseDevServerArgs(argv: string[]): DevServerOptions & { logLevel: string } {
  const { values } = parseArgs({
    args: argv,
    options: {
      port: { type: 'string', default: '7233' },
      host: { type: 'string', default: '127.0.0.1' },
      db: { type: 'string' },
      schema: { type: 'string' },
      namespace: { type: 'string', multiple: true },
      'time-skipping': { type: 'boolean', default: false },
      'log-level': { type: 'string', default: 'info' },
      'ui-port': { type: 'string' },
      headless: { type: 'boolean', default: false },
      'max-connections': { type: 'string' },
      'max-connections-per-client': { type: 'string' },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`invalid --port ${values.port}`);
  const uiPort = values['ui-port'] !== undefined ? Number(values['ui-port']) : port ? port + 1000 : 0;
  if (!Number.isInteger(uiPort) || uiPort < 0 || uiPort > 65535) throw new Error(`invalid --ui-port ${values['ui-port'] ?? uiPort}`);
  const [maxConnections, maxConnectionsPerClient] = (['max-connections', 'max-connections-per-client'] as const).map((flag) => {
    const v = values[flag];
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new Error(`invalid --${flag} ${v}`);
    return n;
  });
  return {
    host: values.host,
    port,
    maxConnections,
    maxConnectionsPerClient,
    persistence: values.db ? { kind: 'postgres', url: values.db, schema: values.schema } : { kind: 'memory' },
    namespaces: values.namespace,
    // From the command line, time skipping starts unlocked: nothing else would ever unlock it.
    timeSkipping: values['time-skipping'],
    timeSkippingStartsUnlocked: values['time-skipping'],
    logLevel: values['log-level']!,
    ui: values.headless || !uiPort ? undefined : { port: uiPort },
  };
}

/** `temporal-devserver-test <port> [--enable-time-skipping]`, as Temporal's Java test server takes it. */
function parseTestServerArgs(argv: string[]): DevServerOptions & { logLevel: string } {
  const [portArg, flag] = argv;
  const port = Number(portArg);
  if (!Number.isInteger(port) || port <= 0) throw new Error('usage: temporal-devserver-test <port> [--enable-time-skipping]');
  if (flag && flag !== '--enable-time-skipping') throw new Error(`unknown flag ${flag}`);
  return {
    port,
    timeSkipping: true,
    timeSkippingStartsUnlocked: flag === '--enable-time-skipping',
    logLevel: process.env.TEMPORAL_DEVSERVER_LOG_LEVEL ?? 'warn',
  };
}

export async function main(argv: string[], dialect: 'devserver' | 'testserver' = 'devserver'): Promise<DevServer> {
  const opts = dialect === 'testserver' ? parseTestServerArgs(argv) : parseDevServerArgs(argv);
  const log = pino({ level: opts.logLevel }, pino.destination(2));
  const server = await startDevServer({ ...opts, log });
  if (dialect === 'devserver') {
    log.info({ address: server.address, ui: server.ui?.url }, 'ready');
    if (server.ui) process.stderr.write(`Temporal Web UI: ${server.ui.url}\n`);
  }
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping');
    server.stop().then(
      () => process.exit(0),
      (err) => {
        log.error({ err }, 'stop failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  return server;
}

export function run(dialect: 'devserver' | 'testserver'): void {
  main(process.argv.slice(2), dialect).catch((err: unknown) => {
    process.stderr.write(`temporal-devserver: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
