/**
 * infra install | up | down | status — the local brokers for development and the main job.
 *   install fetch/build nats-server, the Kafka jars and etcd into .infra/ (no start)
 *   up      install if needed, start nats-server (JetStream), Kafka (KRaft) and etcd, wait until ready
 *   down    stop only what `up` started
 *   status  show each broker, its pid and whether it answers
 * Existing brokers: set NATS_URL, KAFKA_BROKERS and/or ETCD_ENDPOINTS and nothing is started for them.
 * Ports: VANTAGE_NATS_PORT (4222), VANTAGE_NATS_MONITOR_PORT (8222),
 *        VANTAGE_KAFKA_PORT (9092), VANTAGE_KAFKA_CONTROLLER_PORT (9093),
 *        VANTAGE_ETCD_PORT (2379), VANTAGE_ETCD_PEER_PORT (2380).
 */
import { ensureEtcd, ensureKafkaJars, ensureNatsServer } from './install';
import { brokersDown, brokersStatus, brokersUp } from './local';

const log = (m: string): void => {
  process.stderr.write(`[infra] ${m}\n`);
};

async function main(cmd: string | undefined): Promise<number> {
  switch (cmd) {
    case 'up': {
      const t0 = Date.now();
      const { endpoints, readyMs } = await brokersUp(log, { etcd: true });
      log(`nats ready at ${endpoints.natsUrl}${readyMs.nats !== null ? ` (started in ${readyMs.nats} ms)` : ' (external)'}`);
      log(`kafka ready at ${endpoints.kafkaBrokers}${readyMs.kafka !== null ? ` (started in ${readyMs.kafka} ms)` : ' (external)'}`);
      log(`etcd ready at ${endpoints.etcdEndpoints}${typeof readyMs.etcd === 'number' ? ` (started in ${readyMs.etcd} ms)` : ' (external)'}`);
      log(`up in ${Date.now() - t0} ms`);
      process.stdout.write(JSON.stringify({ ...endpoints, readyMs }) + '\n');
      return 0;
    }
    case 'install': {
      // Fetch and build everything the brokers need, without starting them (CI's first step).
      const t0 = Date.now();
      const nats = await ensureNatsServer(log);
      const libs = await ensureKafkaJars(log);
      const etcd = await ensureEtcd(log);
      log(`nats-server: ${nats}`);
      log(`kafka jars: ${libs}`);
      log(`etcd: ${etcd}`);
      log(`install done in ${Date.now() - t0} ms`);
      return 0;
    }
    case 'down':
      await brokersDown(log);
      return 0;
    case 'status': {
      const st = await brokersStatus();
      for (const s of st) {
        const state = s.pid !== null ? `running (pid ${s.pid})` : s.mode === 'external' ? 'external' : s.stalePidFile ? 'stopped (stale pid file)' : 'stopped';
        process.stdout.write(`${s.name.padEnd(6)} ${state.padEnd(26)} ${s.address.padEnd(24)} ${s.reachable ? 'answering' : 'not answering'}${s.logFile ? `  log: ${s.logFile}` : ''}\n`);
      }
      return st.every((s) => s.reachable) ? 0 : 3;
    }
    default:
      process.stderr.write('usage: infra install | up | down | status\n');
      return 2;
  }
}

main(process.argv[2]).then(
  (code) => process.exit(code),
  (err: unknown) => {
    log(`error: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
