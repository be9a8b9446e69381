// runService: the start-up sequence every vantage service shares (README.md, "runService"), so a
// service's main is its schema and its start(ctx). Its own shutdown steps (NATS drain, Kafka close,
// the ops server) are in the `close` phase, so a service's intake/drain/flush steps run while
// connections and metrics are still up.

import type { DestinationStream } from 'pino';
import type { Registry } from 'prom-client';
import { baseConfigSchema, loadConfig, type BaseConfig } from './config';
import { connectKafka, type KafkaClient } from './kafka';
import { createLogger, defaultInstanceId, type Logger } from './logger';
import { runtimeMetrics, type RuntimeMetrics } from './metrics';
import { redactSecrets } from './secrets';
import { kafkaSecurityProblems, natsSecurityProblems, throwIfProblems } from './security';
import { connectNats, natsConnected, natsDisconnectedForMs, type NatsConnection } from './nats';
import { createRegistry, runHealthCheck, startOpsServer, type HealthCheck, type HealthResult } from './ops';
import type { DeepReadonly, ObjectSchema, TSchema } from './schema';
import { createShutdown, type Shutdown, type ShutdownReport } from './shutdown';

/** Exit code when configuration is invalid (nothing was started). */
export const EXIT_CONFIG_INVALID = 2;

export interface ServiceContext<C extends BaseConfig, K extends boolean> {
  readonly config: DeepReadonly<C>;
  readonly instanceId: string;
  readonly log: Logger;
  readonly nc: NatsConnection;
  readonly kafka: K extends true ? KafkaClient : undefined;
  /** Register service metrics here; served on /metrics. */
  readonly registry: Registry;
  readonly metrics: RuntimeMetrics;
  readonly shutdown: Shutdown;
  /** Adds a named check to /healthz; the endpoint is healthy only when every check is. */
  addHealthCheck(name: string, check: HealthCheck): void;
}

interface ServiceSpec<C extends BaseConfig, K extends boolean> {
  /** Service name (`indexer`, `decision`, ...): lowest-priority value of `config.service`. */
  name: string;
  /** The service's schema, built with `s.extend(baseConfigSchema, {...})`. Default: the base schema. */
  schema?: ObjectSchema<Record<string, TSchema<unknown>>> & TSchema<C>;
  /** Connect Kafka before start(). */
  kafka?: K;
  /**
   * The server does not deliver this connection's own publishes back to it (NATS `no_echo`): for a
   * service that subscribes to a subject it also publishes on and has no use for its own messages.
   */
  noEcho?: boolean;
  start(ctx: ServiceContext<C, K>): void | Promise<void>;

  // Overrides for tests and embedding; production mains leave them unset.
  env?: Readonly<Record<string, string | undefined>>;
  /** Default `process.exit`. */
  exit?: (code: number) => void;
  /** Default SIGINT and SIGTERM; `[]` for none. */
  signals?: readonly NodeJS.Signals[];
  /** Install uncaughtException/unhandledRejection handlers that shut down with exit 1. Default true. */
  processHandlers?: boolean;
  logDestination?: DestinationStream;
}

export interface RunningService<C extends BaseConfig, K extends boolean> {
  readonly ctx: ServiceContext<C, K>;
  /** Bound port of the ops server. */
  readonly opsPort: number;
  /** Same as a SIGTERM. */
  stop(reason?: string): Promise<ShutdownReport>;
}

/**
 * Starts a service. Resolves once `start(ctx)` has returned. On a start-up
 * failure it logs, shuts down what was opened and exits; with an injected
 * `exit` (tests) it then rejects with the error instead.
 */
export async function runService<C extends BaseConfig = BaseConfig, K extends boolean = false>(
  spec: ServiceSpec<C, K>,
): Promise<RunningService<C, K>> {
  const exit = spec.exit ?? ((code: number) => process.exit(code));
  const schema = spec.schema ?? baseConfigSchema;
  const destination = spec.logDestination;

  let config: DeepReadonly<C>;
  try {
    config = loadConfig(schema as ObjectSchema<Record<string, TSchema<unknown>>>, {
      env: spec.env ?? process.env,
      defaults: { service: spec.name },
    }) as unknown as DeepReadonly<C>;
    // Security settings are part of the configuration: a missing secret file, two auth methods or
    // credentials in a URL are CONFIG_INVALID (exit 2) before anything connects.
    const base = config as unknown as DeepReadonly<BaseConfig>;
    throwIfProblems([...natsSecurityProblems(base.nats), ...(spec.kafka === true ? kafkaSecurityProblems(base.kafka) : [])]);
  } catch (e) {
    // No configured logger yet; a bootstrap one keeps the error in the same JSON shape.
    const boot = createLogger({ service: spec.name, instanceId: defaultInstanceId(), level: 'info', destination });
    boot.fatal({ err: e }, 'configuration invalid');
    exit(EXIT_CONFIG_INVALID);
    throw e;
  }

  const instanceId = config.instanceId === '' ? defaultInstanceId() : config.instanceId;
  const log = createLogger({ service: config.service, instanceId, level: config.log.level, destination });
  const shutdown = createShutdown({ deadlineMs: config.shutdown.deadlineMs, log, exit, signals: spec.signals });

  if (spec.processHandlers ?? true) {
    // A crash still goes through the shutdown sequence (bounded by its
    // deadline) so in-flight work is drained and buffered records flushed.
    process.on('uncaughtException', (err) => {
      log.fatal({ err }, 'uncaught exception');
      void shutdown.trigger('uncaught exception', 1);
    });
    process.on('unhandledRejection', (reason) => {
      log.fatal({ err: reason }, 'unhandled rejection');
      void shutdown.trigger('unhandled rejection', 1);
    });
  }

  const registry = createRegistry(config.service);
  const metrics = runtimeMetrics(registry);
  const checks = new Map<string, HealthCheck>();
  let started = false;

  const health = async (): Promise<HealthResult> => {
    const details: Record<string, unknown> = { state: started ? shutdown.state : 'starting' };
    let ok = started && shutdown.state === 'running';
    for (const [name, check] of checks) {
      const r = await runHealthCheck(check);
      details[name] = { ok: r.ok, ...(r.details ?? {}) };
      ok &&= r.ok;
    }
    return { ok, details };
  };

  // Secret-looking values are censored and URL user-info stripped (the settings hold file paths, not secrets).
  log.info({ config: redactSecrets(config) }, 'starting');
  try {
    const nc = await connectNats(
      { ...config.nats, name: config.nats.name === '' ? `${config.service}-${instanceId}` : config.nats.name },
      log,
      { metrics, noEcho: spec.noEcho === true },
    );
    shutdown.register('nats', 'close', async () => {
      if (nc.isClosed()) return;
      // drain() flushes pending publishes and lets subscriptions finish; if
      // the server is gone it fails, and close() at least releases the socket.
      await nc.drain().catch(async (e: unknown) => {
        log.warn({ err: e }, 'nats drain failed; closing');
        await nc.close();
      });
    });
    checks.set('nats', () => {
      if (natsConnected(nc)) return { ok: true, details: { server: nc.getServer() } };
      // Down: unhealthy once it has lasted health.natsDownMs (a reconnect within it is a blip); closed is final.
      const downMs = natsDisconnectedForMs(nc);
      const closed = nc.isClosed();
      return { ok: !closed && downMs < config.health.natsDownMs, details: { server: nc.getServer(), reason: closed ? 'connection closed' : 'disconnected', downMs, thresholdMs: config.health.natsDownMs } };
    });

    let kafka: KafkaClient | undefined;
    if (spec.kafka === true) {
      const k = await connectKafka(config.kafka, log, config.service);
      kafka = k;
      shutdown.register('kafka', 'close', () => k.close());
    }

    const ops = await startOpsServer({ host: config.http.host, port: config.http.port, registry, health, log });
    shutdown.register('ops-server', 'close', () => ops.close());

    const ctx: ServiceContext<C, K> = {
      config,
      instanceId,
      log,
      nc,
      kafka: kafka as K extends true ? KafkaClient : undefined,
      registry,
      metrics,
      shutdown,
      addHealthCheck: (name, check) => void checks.set(name, check),
    };
    await spec.start(ctx);
    // Every subscription the service made is registered on the server before it says it has started:
    // a request sent on seeing "service started" finds its responders (a PING/PONG round trip).
    await nc.flush();
    started = true;
    log.info({ opsPort: ops.port, opsHost: ops.host }, 'service started');
    return { ctx, opsPort: ops.port, stop: (reason = 'stop requested') => shutdown.trigger(reason) };
  } catch (e) {
    log.fatal({ err: e }, 'start-up failed');
    await shutdown.trigger('start-up failed', 1);
    throw e;
  }
}
