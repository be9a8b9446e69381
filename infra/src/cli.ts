/**
 * infra install | up | down | status [--secure]: the local brokers for development and the main job
 * (infra/README.md, `local.ts`, `cli.ts`: what each command starts, the variables naming existing
 * brokers and the ports).
 */
import { join } from 'node:path';
import { ensureEtcd, ensureKafkaJars, ensureNatsServer } from './install';
import { brokersDown, brokersStatus, brokersUp, localSecureDeployment } from './local';
import { KAFKA_USERS, type SecureDeployment } from './secure';

const log = (m: string): void => {
  process.stderr.write(`[infra] ${m}\n`);
};

async function main(cmd: string | undefined, flags: readonly string[]): Promise<number> {
  const secure = flags.includes('--secure');
  switch (cmd) {
    case 'up': {
      const t0 = Date.now();
      const { endpoints, readyMs } = await brokersUp(log, { secure, etcd: !secure });
      const d = secure ? localSecureDeployment() : undefined;
      if (d) {
        log(`secured: TLS with client certificates (CA ${d.tls.caFile}), one NATS user per role, Kafka SASL_SSL with SCRAM-SHA-512`);
        log(`secret files (mode 0600): ${join(d.dir, 'secrets')}; settings of a role: the "roles" object printed below`);
      }
      log(`up in ${Date.now() - t0} ms`);
      process.stdout.write(JSON.stringify({ ...endpoints, readyMs, ...(d ? secureSummary(d) : {}) }) + '\n');
      return 0;
    }
    case 'install': {
      // Fetch and build everything the brokers need, without starting them (CI's first step).
      const t0 = Date.now();
      log(`nats-server: ${await ensureNatsServer(log)}`);
      log(`kafka jars: ${await ensureKafkaJars(log)}`);
      log(`etcd: ${await ensureEtcd(log)}`);
      log(`install done in ${Date.now() - t0} ms`);
      return 0;
    }
    case 'down':
      await brokersDown(log, { secure });
      return 0;
    case 'status': {
      const st = await brokersStatus({ secure });
      for (const s of st) {
        const state = s.pid !== null ? `running (pid ${s.pid})` : s.mode === 'external' ? 'external' : s.stalePidFile ? 'stopped (stale pid file)' : 'stopped';
        process.stdout.write(`${s.name.padEnd(6)} ${state.padEnd(26)} ${s.address.padEnd(24)} ${s.reachable ? 'answering' : 'not answering'}${s.logFile ? `  log: ${s.logFile}` : ''}\n`);
      }
      return st.every((s) => s.reachable) ? 0 : 3;
    }
    default:
      process.stderr.write('usage: infra install | up [--secure] | down [--secure] | status [--secure]\n');
      return 2;
  }
}

/** Each role's VANTAGE_* settings (paths only, never the secrets) for `up --secure`'s JSON line. */
function secureSummary(d: SecureDeployment): Record<string, unknown> {
  const roles = Object.fromEntries(d.roles.map((r) => [r.role, d.natsEnv(r.role)]));
  const kafkaUsers = Object.fromEntries(KAFKA_USERS.map((u) => [u, d.kafkaEnv(u)]));
  return { secure: { caFile: d.tls.caFile, roles, kafkaUsers } };
}

main(process.argv[2], process.argv.slice(3)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    log(`error: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
