/**
 * Baseline for the indexer benchmark: a bare NATS request-reply responder in its
 * own process, answering every request on SUBJECT (queue group as the indexer
 * uses) with a fixed payload of REPLY_BYTES bytes, the size of a typical observe
 * reply. Prints "ready" once subscribed; exits on SIGTERM.
 * Run: node --import tsx services/indexer/bench/echo-server.ts <natsUrl> <subject> <replyBytes> [busyUs]
 * With busyUs > 0 (the benchmark's BENCH_ECHO_BUSY_US), each request first spins that long (wall
 * time): an echo that spends about what the indexer spends per query, to tell how much latency that
 * much work costs on this machine, apart from what the work is.
 */
import { connect } from '@nats-io/transport-node';

const [url, subject, bytes, busy] = process.argv.slice(2);
const BUSY_MS = Number(busy ?? 0) / 1000;
if (!url || !subject || !bytes) {
  process.stderr.write('usage: echo-server.ts <natsUrl> <subject> <replyBytes> [busyUs]\n');
  process.exit(2);
}
const payload = new Uint8Array(Number(bytes)).fill(0x20);
const nc = await connect({ servers: url });
nc.subscribe(subject, {
  queue: 'bench-echo',
  callback: (_err, m) => {
    if (BUSY_MS > 0) {
      const until = performance.now() + BUSY_MS;
      while (performance.now() < until);
    }
    m.respond(payload);
  },
});
await nc.flush();
process.stdout.write('ready\n');
process.on('SIGTERM', () => {
  void nc.drain().finally(() => process.exit(0));
});
