/**
 * The baseline in a process of its own, for a run on another Node binary (`rawNodemailerRate` with
 * `node`): prepares (and warms up), says so on stdout, sends when told on stdin, exits once the sink has them all.
 */
import { type BaselineRun, baselineSender } from './smtp-sink-process';

const opts = JSON.parse(process.argv[2]) as BaselineRun & { port: number };
const sender = baselineSender(opts.port, opts);
const warm = opts.warmup ? sender.run(opts.warmup) : Promise.resolve();
void warm.then(() => process.stdout.write('ready\n'));
process.stdin.once('data', () => {
  sender
    .run()
    .then(() => {
      sender.close();
      process.exit(0);
    })
    .catch((err) => {
      console.error(err);
      process.exit(1);
    });
});
