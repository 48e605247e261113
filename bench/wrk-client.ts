/**
 * The /v1/send benches' load generator when the machine has `wrk` (Debian package wrk): a C HTTP
 * client, one thread on epoll, that costs the shared cores a small fraction of what Node's own client
 * does (bench:send prints both, measured alone), so the figures measure the service, as smtp-sink
 * does on the SMTP side. Each request goes to a new contact: a Lua script writes the body from the
 * request's number. A fixed count of requests, not a duration: once the last answer is in, the script
 * says so on stdout and wrk is stopped.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import readline from 'node:readline';
import { cpuSecondsOf, type LoadRun, nodeRequests } from './service-process';

const WRK = ['/usr/bin/wrk', '/usr/local/bin/wrk'].find((p) => fs.existsSync(p));

export const wrkAvailable = () => WRK !== undefined;

/** Which client sends a bench's requests: wrk, or this process's own through `agent`. */
export type LoadClient = 'wrk' | 'node';

/** The load from `client`; answers how many answers were not 200 and the client's CPU seconds. */
export function clientRequests(client: LoadClient, agent: http.Agent, run: LoadRun): Promise<{ failed: number; cpuSeconds: number }> {
  return client === 'wrk' ? wrkRequests(run) : nodeRequests(agent, run);
}

const STALL_MS = 60_000;
const ADDRESS_MARK = '__wrk_address__';
/** Stands for the request's number in the body: a number no body holds otherwise. */
const NUMBER_MARK = 918_273_645;
/** A Lua long string that cannot end early, whatever the text holds. */
const luaString = (text: string) => {
  let level = 1;
  while (text.includes(`]${'='.repeat(level)}]`)) level++;
  return `[${'='.repeat(level)}[${text}]${'='.repeat(level)}]`;
};

/**
 * Sends `requests` requests through wrk, `connections` at a time; answers how many were not 200 and
 * the CPU seconds wrk used.
 */
export async function wrkRequests(run: LoadRun): Promise<{ failed: number; cpuSeconds: number }> {
  if (!WRK) throw new Error('wrk is not installed (apt-get install wrk), or run with BENCH_CLIENT=node');
  // `body` is called once, with marks the script replaces per request.
  const template = JSON.stringify(run.body(ADDRESS_MARK, NUMBER_MARK));
  // The body as pieces around the marks, in the order they appear.
  const pieces = template.split(new RegExp(`(${ADDRESS_MARK}|${NUMBER_MARK})`));
  const parts = pieces.map((p) => (p === ADDRESS_MARK ? 'address' : p === String(NUMBER_MARK) ? 'tostring(i)' : luaString(p)));
  const script = `
wrk.method = "POST"
wrk.path = ${luaString(run.path)}
${Object.entries({ 'Content-Type': 'application/json', ...run.headers })
  .map(([k, v]) => `wrk.headers[ ${luaString(k)} ] = ${luaString(v)}`)
  .join('\n')}
-- wrk 4.1 calls request() once to check the script before it sends anything: that call is not counted.
local total, sent, answered, failed = ${run.requests}, -1, 0, 0
request = function()
  -- Nothing to write: the connection then waits, unanswered, until wrk is stopped.
  if sent >= total then return "" end
  local i = math.max(sent, 0)
  sent = sent + 1
  local address = ${luaString(run.prefix)} .. "-" .. i .. "@example.org"
  return wrk.format(nil, nil, nil, ${parts.join(' .. ')})
end
response = function(status, headers, body)
  answered = answered + 1
  if status ~= 200 then failed = failed + 1 end
  if answered % 500 == 0 and answered < total then
    io.write("answered " .. answered .. "\\n")
    io.flush()
  end
  if answered == total then
    io.write("done " .. failed .. "\\n")
    io.flush()
  end
end
`;
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'postbox-wrk-')), 'send.lua');
  fs.writeFileSync(file, script);
  // One thread: all requests count in one Lua state. The duration and timeout only bound a run that never finishes.
  const child = spawn(WRK, ['-t1', `-c${run.connections}`, '-d3600s', '--timeout', '600s', '-s', file, `http://127.0.0.1:${run.port}`], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // wrk reports a script error on stderr and then runs its default request: stop it at once.
  let complaint = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    complaint += chunk.toString();
    child.kill('SIGINT');
  });
  try {
    const lines = readline.createInterface({ input: child.stdout! });
    // A run that stops answering fails the bench rather than waiting out wrk's duration.
    let stalled = setTimeout(() => child.kill('SIGINT'), STALL_MS);
    for await (const line of lines) {
      clearTimeout(stalled);
      stalled = setTimeout(() => child.kill('SIGINT'), STALL_MS);
      const done = /^done (\d+)$/.exec(line);
      if (done) {
        clearTimeout(stalled);
        return { failed: Number(done[1]), cpuSeconds: cpuSecondsOf(child.pid!) };
      }
    }
    clearTimeout(stalled);
    throw new Error(
      complaint ? `wrk: ${complaint.trim()}` : `wrk ended, or stalled for ${STALL_MS / 1000} s, before its ${run.requests} requests were answered`,
    );
  } finally {
    child.kill('SIGINT');
    fs.rmSync(path.dirname(file), { recursive: true, force: true });
  }
}
