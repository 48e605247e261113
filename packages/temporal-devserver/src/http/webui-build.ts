/**
 * Builds the Temporal Web UI app in `webui/` (its own package and lock, so the service's install,
 * build and tests never pay for it) once, and reuses the build while its sources and lock are
 * unchanged. `npm ci --ignore-scripts` installs it from the npm registry; nothing else is fetched.
 * Concurrent starts share one build through a lock directory.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';

const STAMP = '.postbox-build';
const DEPS_STAMP = '.postbox-lock';
const LOCK = '.build.lock';
const STALE_LOCK_MS = 15 * 60_000;
const INPUTS = ['package.json', 'package-lock.json', 'svelte.config.js', 'vite.config.js', 'tailwind.config.js', 'postcss.config.js', '.env', 'src', 'static'];

/** The `webui/` package next to this package's package.json, found upwards from this file (src or dist). */
export function webUiDir(): string {
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'webui');
    if (fs.existsSync(path.join(candidate, 'package.json')) && fs.existsSync(path.join(dir, 'package.json'))) return candidate;
    if (path.dirname(dir) === dir) throw new Error('webui/ (the Temporal Web UI package) not found above ' + __dirname);
  }
}

/** The @temporalio/ui version the app is built from (pinned in webui/package.json). */
export function webUiVersion(dir = webUiDir()): string {
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
  return pkg.devDependencies['@temporalio/ui'];
}

function hashInputs(dir: string, names: string[]): string {
  const h = createHash('sha256');
  const visit = (rel: string) => {
    const abs = path.join(dir, rel);
    if (!fs.existsSync(abs)) return;
    if (fs.statSync(abs).isDirectory()) {
      for (const child of fs.readdirSync(abs).sort()) visit(path.join(rel, child));
    } else {
      h.update(rel).update('\0').update(fs.readFileSync(abs)).update('\0');
    }
  };
  names.forEach(visit);
  return h.digest('hex');
}

/**
 * Build steps still running; killed if this process exits first. A process killed outright leaves its
 * step running, so the lock names the step too and is stale only once both are gone.
 */
const running = new Set<ChildProcess>();
let exitHookInstalled = false;

const readStamp = (file: string) => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').trim() : undefined);

function run(cmd: string, args: string[], cwd: string, log: Logger, signal?: AbortSignal, lock?: string): Promise<void> {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => running.forEach((c) => c.kill()));
  }
  return new Promise((resolve, reject) => {
    signal?.throwIfAborted();
    // Lowest priority, so the build never competes with delivery for the cores; `nice` execs the step, so
    // every thread and child of it starts niced (setpriority after a spawn would miss the threads already made).
    const niced = process.platform !== 'win32';
    const child = spawn(niced ? 'nice' : cmd, niced ? ['-n', '19', cmd, ...args] : args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], signal });
    running.add(child);
    if (lock && child.pid) fs.writeFileSync(path.join(lock, 'step'), String(child.pid));
    const tail: string[] = [];
    const collect = (chunk: Buffer) => {
      for (const line of chunk.toString().split('\n')) if (line.trim()) tail.push(line);
      tail.splice(0, Math.max(0, tail.length - 30));
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.once('error', reject);
    child.once('close', (code) => {
      running.delete(child);
      if (signal?.aborted) return reject(new Error('Temporal Web UI build stopped'));
      if (code === 0) return resolve();
      log.error({ command: [cmd, ...args].join(' '), output: tail.join('\n') }, 'Temporal Web UI build step failed');
      reject(new Error(`${path.basename(cmd)} ${args.join(' ')} exited with ${code}`));
    });
  });
}

/** npm as the running `npm start` uses it, else the one on PATH. */
function npmCommand(): { cmd: string; pre: string[] } {
  const execPath = process.env.npm_execpath;
  if (execPath && /npm-cli\.[cm]?js$/.test(execPath)) return { cmd: process.execPath, pre: [execPath] };
  return { cmd: 'npm', pre: [] };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A lock whose process and build step are both gone, or held for longer than any build takes, is stale. */
function staleLock(lock: string): boolean {
  const stat = fs.statSync(lock, { throwIfNoEntry: false });
  if (!stat) return false;
  if (Date.now() - stat.mtimeMs > STALE_LOCK_MS) return true;
  const pid = Number(readStamp(path.join(lock, 'pid')));
  const step = Number(readStamp(path.join(lock, 'step')) ?? 0);
  return pid > 0 && !alive(pid) && !(step > 0 && alive(step));
}

async function withLock<T>(dir: string, log: Logger, signal: AbortSignal | undefined, fn: (lock: string) => Promise<T>): Promise<T> {
  const lock = path.join(dir, LOCK);
  for (let waitedLog = false; ;) {
    signal?.throwIfAborted();
    try {
      fs.mkdirSync(lock);
      fs.writeFileSync(path.join(lock, 'pid'), String(process.pid));
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      if (staleLock(lock)) {
        fs.rmSync(lock, { recursive: true, force: true });
        continue;
      }
      if (!waitedLog) log.info('another process is building the Temporal Web UI; waiting for it');
      waitedLog = true;
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
  try {
    return await fn(lock);
  } finally {
    fs.rmSync(lock, { recursive: true, force: true });
  }
}

/**
 * The directory of the built app: at once when a build of the current sources exists, otherwise
 * after installing webui/'s packages (when its lock changed) and building (about a minute on two cores).
 */
export async function ensureWebUi(log: Logger, dir = webUiDir(), signal?: AbortSignal): Promise<string> {
  const buildDir = path.join(dir, 'build');
  const current = () => hashInputs(dir, INPUTS);
  if (readStamp(path.join(buildDir, STAMP)) === current()) return buildDir;
  return withLock(dir, log, signal, async (lock) => {
    const hash = current();
    if (readStamp(path.join(buildDir, STAMP)) === hash) return buildDir;
    const started = Date.now();
    const depsHash = hashInputs(dir, ['package.json', 'package-lock.json']);
    if (readStamp(path.join(dir, 'node_modules', DEPS_STAMP)) !== depsHash) {
      log.info('installing the Temporal Web UI build tools (webui/, npm ci; first start only)');
      const npm = npmCommand();
      await run(npm.cmd, [...npm.pre, 'ci', '--include=dev', '--ignore-scripts', '--no-audit', '--no-fund'], dir, log, signal, lock);
      fs.writeFileSync(path.join(dir, 'node_modules', DEPS_STAMP), depsHash);
    }
    log.info('building the Temporal Web UI (webui/, vite build; first start or after its sources changed)');
    await run(process.execPath, [path.join(dir, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', '--logLevel', 'warn'], dir, log, signal, lock);
    fs.writeFileSync(path.join(buildDir, STAMP), hash);
    log.info({ seconds: Math.round((Date.now() - started) / 1000) }, 'Temporal Web UI built');
    return buildDir;
  });
}

/** `npm run webui:build`: builds ahead of the first start (e.g. in a container image). */
if (require.main === module) {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const pino = require('pino') as typeof import('pino');
  const log = pino.default({ level: 'info' }, pino.destination(2));
  ensureWebUi(log).then(
    (dir) => log.info({ dir }, 'Temporal Web UI ready'),
    (err: unknown) => {
      log.error({ err }, 'Temporal Web UI build failed');
      process.exit(1);
    },
  );
}
