/**
 * The dev server's Web UI port, as `startDevServer({ ui })` brings it up. The UI is a convenience:
 * when its port is taken or `webui/` is absent (a runtime image without it), the dev server still
 * serves, and the log says why there is no UI.
 */
import type net from 'node:net';
import type { Logger } from 'pino';
import type { GatewayService } from './gateway';
import { startUiServer, type UiServer } from './ui-server';
import { ensureWebUi, webUiDir, webUiVersion } from './webui-build';

export interface WebUiOptions {
  port: number;
  host?: string;
  /** false: the `/api/v1` API alone, no app (tests of the API). */
  app?: boolean;
  /** Host header values answered besides 127.0.0.1, localhost and [::1] on the UI's port. */
  allowedHosts?: string[];
  /** Called with the listener before it listens: an embedding service puts its connection limits on it. */
  guard?: (server: net.Server) => void;
}

export interface WebUi {
  server?: UiServer;
  stop(): Promise<void>;
}

export async function startWebUi(opts: WebUiOptions, services: GatewayService[], log: Logger): Promise<WebUi> {
  const build = new AbortController();
  let server: UiServer | undefined;
  try {
    const dir = webUiDir();
    server = await startUiServer({
      host: opts.host,
      port: opts.port,
      services,
      log,
      uiVersion: webUiVersion(dir),
      allowedHosts: opts.allowedHosts,
      guard: opts.guard,
      app: opts.app === false ? undefined : ensureWebUi(log, dir, build.signal),
    });
    server.ready.catch((err: unknown) => {
      if (!build.signal.aborted) log.error({ err }, 'the Temporal Web UI is unavailable');
    });
  } catch (err) {
    build.abort();
    log.error({ err, port: opts.port }, `the Temporal Web UI could not start on port ${opts.port}; the dev server runs without it`);
  }
  return {
    server,
    stop: async () => {
      build.abort();
      await server?.stop();
    },
  };
}
