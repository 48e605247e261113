/**
 * The baseline in a process of its own, for a run on another Node binary (`rawNodemailerRate` with
 * `node`): prepares, says so on stdout, sends when told on stdin, exits once the sink has them all.
 */
import { type BaselineSpec, baselineSender } from './smtp-sink-process';

const opts = JSON.parse(process.argv[2]) as { port: number; count: number; poolSize: number; concurrency: number; spec: BaselineSpec };
const sender = baselineSender(opts.port, opts);
process.stdout.write('ready\n');
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
