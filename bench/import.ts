/**
 * POST /contacts/import with a 5 MB CSV (about 100,000 rows): seconds from the upload to the job's
 * COMPLETED, polled as a client would.
 *
 *   npm run bench:import                    # 3 runs, each a new file of new contacts
 *   BENCH_RUNS=5 BENCH_ROWS=100000 npm run bench:import
 *
 * The service runs as its own process on embedded defaults (PostgreSQL, durable Temporal dev server).
 */
import { createBenchProject, importContacts, machine, median, startServiceProcess } from './service-process';

const RUNS = Number(process.env.BENCH_RUNS ?? 3);

const MAX_BYTES = 5 * 1024 * 1024;

/** As many rows as fit in 5 MB: email, name, plan, age, city, signed-up date. */
function csvFile(run: number): { csv: string; rows: number } {
  const lines = ['email,name,plan,age,city,signed_up'];
  let size = lines[0].length + 1;
  for (let i = 0; ; i++) {
    const line = `u${i}r${run}@ib.test,User ${i},${['free', 'pro', 'team'][i % 3]},${18 + (i % 60)},City ${i % 500},2026-0${1 + (i % 9)}-1${i % 10}`;
    if (size + line.length + 1 > MAX_BYTES) return { csv: lines.join('\n') + '\n', rows: lines.length - 1 };
    lines.push(line);
    size += line.length + 1;
  }
}

async function main(): Promise<void> {
  const service = await startServiceProcess({ RATE_LIMIT_PER_MINUTE: '100000000' });
  try {
    const project = await createBenchProject(service.port);
    const auth = { authorization: `Bearer ${project.secretKey}` };
    console.log(`POST /contacts/import of a 5 MB CSV, ${RUNS} runs`);
    console.log(`machine: ${machine()}`);
    const seconds: number[] = [];
    for (let run = 1; run <= RUNS; run++) {
      const { csv, rows } = csvFile(run);
      const t0 = Date.now();
      const { job: state, uploaded } = await importContacts(service.port, auth, csv, `run${run}.csv`);
      const took = (Date.now() - t0) / 1000;
      if (state.status !== 'COMPLETED' || state.created !== rows) throw new Error(`import ended ${state.status}: ${JSON.stringify(state).slice(0, 300)}`);
      seconds.push(took);
      console.log(
        `run ${run}: ${rows} rows (${(Buffer.byteLength(csv) / 2 ** 20).toFixed(2)} MB) imported in ${took.toFixed(2)} s ` +
          `(upload answered in ${uploaded.toFixed(2)} s), ${(rows / took).toFixed(0)} rows/s`,
      );
    }
    console.log(`median: ${median(seconds).toFixed(2)} s per 5 MB file (goal: < 10 s)`);
  } finally {
    await service.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
