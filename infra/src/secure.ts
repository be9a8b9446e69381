/**
 * Secured brokers (infra/README.md, `secure.ts`): certificates, the least-privilege NATS permission
 * set, the nats-server configuration that enforces it and Kafka's SASL_SSL listener settings.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { run } from './exec';

// ---- Certificates ----

export type TlsMaterial = ReturnType<typeof ensureTlsMaterial>;

/** Writes `text` readable by its owner only (chmod too: `mode` is masked by the umask and ignored for an existing file). */
export function writeSecretFile(path: string, text: string): void {
  writeFileSync(path, text, { mode: 0o600 });
  chmodSync(path, 0o600);
}

/**
 * A CA and a server and client certificate under `dir`, made once (kept when
 * already there, so a restarted broker keeps its certificates). `name` goes into
 * the CA's common name, so two sets (a trusted and a rogue one in a test) differ.
 */
export function ensureTlsMaterial(dir: string, name = 'vantage-throwaway') {
  mkdirSync(dir, { recursive: true });
  const m = {
    dir,
    /** CA certificate (PEM): what clients and brokers trust. */
    caFile: join(dir, 'ca.pem'),
    caKeyFile: join(dir, 'ca.key'),
    /** Server certificate for 127.0.0.1 / localhost and its key (PKCS#8 PEM, unencrypted). */
    serverCertFile: join(dir, 'server.pem'),
    serverKeyFile: join(dir, 'server.key'),
    /** Server key and certificate in one PEM file (Kafka's PEM keystore). */
    serverBundleFile: join(dir, 'server-bundle.pem'),
    /** A client certificate signed by the CA (mutual TLS). */
    clientCertFile: join(dir, 'client.pem'),
    clientKeyFile: join(dir, 'client.key'),
  };
  if (existsSync(m.serverBundleFile) && existsSync(m.clientCertFile)) return m;
  /** A new RSA 2048 key and a 30-day certificate for it with `extensions`: self-signed, or signed by the CA. */
  const certificate = (keyFile: string, certFile: string, cn: string, signed: boolean, extensions: string[]): void => {
    const sign = signed ? ['-CA', m.caFile, '-CAkey', m.caKeyFile] : [];
    run('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '30', '-subj', `/CN=${cn}`, ...sign, ...extensions.flatMap((e) => ['-addext', e])]);
    chmodSync(keyFile, 0o600);
  };
  certificate(m.caKeyFile, m.caFile, `${name}-ca`, false, ['basicConstraints=critical,CA:TRUE', 'keyUsage=critical,keyCertSign,cRLSign']);
  const leaf = ['basicConstraints=critical,CA:FALSE', 'keyUsage=critical,digitalSignature,keyEncipherment'];
  certificate(m.serverKeyFile, m.serverCertFile, '127.0.0.1', true, [...leaf, 'subjectAltName=IP:127.0.0.1,DNS:localhost', 'extendedKeyUsage=serverAuth,clientAuth']);
  certificate(m.clientKeyFile, m.clientCertFile, `${name}-client`, true, [...leaf, 'extendedKeyUsage=clientAuth']);
  writeSecretFile(m.serverBundleFile, readFileSync(m.serverKeyFile, 'utf8') + readFileSync(m.serverCertFile, 'utf8'));
  return m;
}

/** A fresh random secret (hex, safe in every configuration syntax). */
export function randomSecret(bytes = 18): string {
  return randomBytes(bytes).toString('hex');
}

// ---- Least-privilege NATS permissions ----

export interface SecurePool {
  /** Pool name (our subjects' last token). */
  readonly name: string;
  /** Dynamo namespace and component of the pool's workers. */
  readonly namespace: string;
  readonly component: string;
}

/**
 * The services' default buckets and streams: the outcome service's lease bucket (`outcome.leader.bucket`),
 * the indexers' snapshot object store (`indexer.snapshot.bucket`), the decision and lifecycle streams.
 */
const LEADER_BUCKET = 'vantage_outcome_leader';
const SNAPSHOT_BUCKET = 'vantage-indexer';
const DECISIONS_STREAM = 'VANTAGE_DECISIONS';
const LIFECYCLE_STREAM = 'VANTAGE_LIFECYCLE';

export interface Permission {
  readonly allow: readonly string[];
}

export interface RolePermissions {
  /** Role name = NATS user name in the generated configuration. */
  readonly role: string;
  readonly what: string;
  readonly publish: Permission;
  readonly subscribe: Permission;
  /** Replies to requests received (`allow_responses`): `true` = one reply each; an object for streamed replies. */
  readonly allowResponses: boolean | { readonly max: number; readonly expires: string };
}

const V = 'vantage.v1';

/** Every JetStream API call on one stream (info, create/update, consumers, pulls, message get) and its acks. */
function streamApi(stream: string): string[] {
  return [
    `$JS.API.STREAM.*.${stream}`,
    `$JS.API.STREAM.*.*.${stream}`,
    `$JS.API.CONSUMER.*.${stream}`,
    `$JS.API.CONSUMER.*.${stream}.>`,
    `$JS.API.CONSUMER.*.*.${stream}.>`,
    `$JS.API.DIRECT.GET.${stream}`,
    `$JS.API.DIRECT.GET.${stream}.>`,
    `$JS.ACK.${stream}.>`,
    `$JS.FC.${stream}.>`,
  ];
}

const JS_ACCOUNT_INFO = '$JS.API.INFO';
/** Replies to our own requests (and JetStream API replies) arrive on inboxes. */
const INBOX = '_INBOX.>';

/** The JetStream stream a pool's workers publish their KV events to in JetStream mode. */
const kvEventsStream = (p: SecurePool): string => `namespace-${p.namespace}-component-${p.component}-kv-events`;

function dynamoSubjects(p: SecurePool) {
  const component = `namespace.${p.namespace}.component.${p.component}`;
  return {
    kvEvents: `${component}.kv-events`,
    legacyKvEvents: `${component}.kv_events`,
    kvMetrics: `namespace.${p.namespace}.kv_metrics`,
    activeSequences: `${component}.active_sequences_events`,
    jsKvEvents: `${kvEventsStream(p)}.kv-events`,
    // Dynamo 1.6.1's endpoint-scoped subjects (any endpoint of the component: discovery names them).
    endpointKvEvents: `${component}.endpoint.*.kv-events`,
    endpointKvMetrics: `${component}.endpoint.*.kv_metrics`,
    endpointForwardPass: `${component}.endpoint.*.forward-pass-metrics`,
    endpointActiveSequences: `${component}.endpoint.*.active_sequences_events`,
  };
}

/** What a worker of the pool publishes: its KV events, load reports and forward-pass metrics in every supported shape, and its registrations. */
function workerPublishes(p: SecurePool): string[] {
  const d = dynamoSubjects(p);
  return [d.kvEvents, d.legacyKvEvents, d.kvMetrics, d.jsKvEvents, d.endpointKvEvents, d.endpointKvMetrics, d.endpointForwardPass, `${V}.workers.${p.name}`];
}

/**
 * The permission set: one role per vantage component and per pool where the
 * component is per pool. Subjects are the ones each service's README and source
 * name (`@vantage/protocol` for ours, `@vantage/wire` for Dynamo's).
 */
export function rolePermissions(pools: readonly SecurePool[]): RolePermissions[] {
  const roles: RolePermissions[] = [];
  for (const p of pools) {
    const d = dynamoSubjects(p);
    roles.push({
      role: `indexer-${p.name}`,
      what: `indexer of pool ${p.name}: reads the pool's Dynamo events and our bookings, lifecycle and registrations, answers observe, keeps snapshots`,
      publish: { allow: [JS_ACCOUNT_INFO, ...streamApi(`OBJ_${SNAPSHOT_BUCKET}`), `$O.${SNAPSHOT_BUCKET}.>`, ...streamApi(kvEventsStream(p))] },
      subscribe: {
        allow: [
          // Every Dynamo subject of the pool but the JetStream stream's (read through the JetStream API above).
          ...Object.values(d).filter((x) => x !== d.jsKvEvents),
          `${V}.bookings.${p.name}`,
          `${V}.lifecycle.${p.name}`,
          `${V}.workers.${p.name}`,
          `${V}.observe.${p.name}`,
          '$SRV.>',
          INBOX,
        ],
      },
      allowResponses: true,
    });
    roles.push({
      role: `worker-${p.name}`,
      what: `a Dynamo worker of pool ${p.name} (or the simulated fleet's): publishes only this pool's KV events, load and registrations`,
      publish: { allow: workerPublishes(p) },
      subscribe: { allow: [`${V}.fleet.generate.${p.name}.*`] },
      // The simulated worker streams progress messages back to one generate request's inbox.
      allowResponses: { max: 1_000_000, expires: '15m' },
    });
  }
  roles.push({
    role: 'decision',
    what: "decision service: answers route, holds its pools' state (the indexers' inputs and snapshots) or asks the indexers, the only publisher of bookings and decision records",
    publish: {
      allow: [
        `${V}.observe.*`,
        `${V}.bookings.*`,
        `${V}.decisions`,
        JS_ACCOUNT_INFO,
        ...streamApi(DECISIONS_STREAM),
        // Local pools restore from the indexers' snapshots and replay JetStream-mode KV events.
        ...streamApi(`OBJ_${SNAPSHOT_BUCKET}`),
        ...pools.flatMap((p) => streamApi(kvEventsStream(p))),
      ],
    },
    subscribe: {
      allow: [
        `${V}.route`,
        `${V}.lifecycle.*`,
        `${V}.workers.*`,
        `${V}.bookings.*`,
        // What an indexer of each pool reads, as two wildcards: a user JWT carrying every subject apart would pass
        // nats-server's default 4 KiB control line (a CONNECT that long is dropped).
        ...pools.flatMap((p) => [`namespace.${p.namespace}.component.${p.component}.>`, dynamoSubjects(p).kvMetrics]),
        '$SRV.>',
        INBOX,
      ],
    },
    allowResponses: true,
  });
  roles.push({
    role: 'outcome',
    what: 'outcome service: consumes the decision and lifecycle streams, holds the leadership lease (only it may write the lease key)',
    publish: { allow: [JS_ACCOUNT_INFO, ...streamApi(DECISIONS_STREAM), ...streamApi(LIFECYCLE_STREAM), ...streamApi(`KV_${LEADER_BUCKET}`), `$KV.${LEADER_BUCKET}.>`] },
    subscribe: { allow: [INBOX] },
    allowResponses: false,
  });
  roles.push({
    role: 'gateway',
    what: 'a gateway: asks route and publishes lifecycle events',
    publish: { allow: [`${V}.route`, `${V}.lifecycle.*`] },
    subscribe: { allow: [INBOX] },
    allowResponses: false,
  });
  roles.push({
    role: 'fleet',
    what: "the simulated fleet process: every pool's workers (KV events, load, registrations) and their generate endpoints; development only",
    publish: { allow: pools.flatMap(workerPublishes) },
    subscribe: { allow: pools.map((p) => `${V}.fleet.generate.${p.name}.*`) },
    allowResponses: { max: 1_000_000, expires: '15m' },
  });
  roles.push({
    role: 'admin',
    what: 'operators and the main job\'s own tools (calibration books background load directly, resets snapshots): everything; never given to a service',
    publish: { allow: ['>'] },
    subscribe: { allow: ['>'] },
    allowResponses: false,
  });
  return roles;
}

const q = (s: string): string => JSON.stringify(s);

function permissionBlock(r: RolePermissions, indent: string): string {
  const lines = [
    `${indent}permissions: {`,
    `${indent}  publish: { allow: [${r.publish.allow.map(q).join(', ')}] }`,
    `${indent}  subscribe: { allow: [${r.subscribe.allow.map(q).join(', ')}] }`,
  ];
  if (r.allowResponses === true) lines.push(`${indent}  allow_responses: true`);
  else if (r.allowResponses !== false) lines.push(`${indent}  allow_responses: { max: ${r.allowResponses.max}, expires: ${q(r.allowResponses.expires)} }`);
  lines.push(`${indent}}`);
  return lines.join('\n');
}

type NatsUserAuth =
  | { kind: 'password'; password: string }
  /** A variable nats-server reads from its environment at start (`password: $NAME`): the example configuration's form. */
  | { kind: 'password-env'; variable: string }
  | { kind: 'nkey'; publicKey: string };

export interface NatsServerConfigOptions {
  readonly port: number;
  readonly monitorPort: number;
  readonly storeDir: string;
  readonly serverName?: string;
  /** TLS on the client port; `verify` requires a client certificate signed by the CA (mutual TLS). */
  readonly tls?: { readonly material: Pick<TlsMaterial, 'caFile' | 'serverCertFile' | 'serverKeyFile'>; readonly verify: boolean };
  /**
   * Who may connect: users with permissions (roles), a single token, or operator
   * mode (JWT; the accounts preloaded into a MEMORY resolver).
   */
  readonly auth:
    | { readonly kind: 'users'; readonly users: readonly { readonly name: string; readonly auth: NatsUserAuth; readonly permissions?: RolePermissions }[] }
    | { readonly kind: 'token'; readonly token: string }
    | { readonly kind: 'operator'; readonly operatorJwt: string; readonly systemAccount: string; readonly accounts: Readonly<Record<string, string>> }
    | { readonly kind: 'none' };
}

/** A server's security: what `natsBroker({ security })` takes (the rest of its configuration is the broker's own). */
export type NatsSecurity = Omit<NatsServerConfigOptions, 'port' | 'monitorPort' | 'storeDir'>;

/** The nats-server configuration text (JetStream on, listening on 127.0.0.1 only). */
export function natsServerConfig(o: NatsServerConfigOptions): string {
  const out: string[] = [
    `listen: "127.0.0.1:${o.port}"`,
    `http: "127.0.0.1:${o.monitorPort}"`,
    `server_name: ${q(o.serverName ?? `vantage-${o.port}`)}`,
    `jetstream { store_dir: ${q(o.storeDir)} }`,
  ];
  if (o.tls !== undefined) {
    out.push(
      'tls {',
      `  cert_file: ${q(o.tls.material.serverCertFile)}`,
      `  key_file: ${q(o.tls.material.serverKeyFile)}`,
      `  ca_file: ${q(o.tls.material.caFile)}`,
      `  verify: ${o.tls.verify ? 'true' : 'false'}`,
      '  timeout: 5',
      '}',
    );
  }
  const a = o.auth;
  if (a.kind === 'users') {
    out.push('authorization {', '  users: [');
    for (const u of a.users) {
      const cred =
        u.auth.kind === 'password'
          ? `user: ${q(u.name)}, password: ${q(u.auth.password)}`
          : u.auth.kind === 'password-env'
            ? `user: ${q(u.name)}, password: $${u.auth.variable}`
            : `nkey: ${q(u.auth.publicKey)}`;
      if (u.permissions === undefined) out.push(`    { ${cred} }`);
      else out.push(`    { ${cred},`, permissionBlock(u.permissions, '      '), '    }');
    }
    out.push('  ]', '}');
  } else if (a.kind === 'token') {
    out.push(`authorization { token: ${q(a.token)} }`);
  } else if (a.kind === 'operator') {
    out.push(`operator: ${q(a.operatorJwt)}`, `system_account: ${q(a.systemAccount)}`, 'resolver: MEMORY', 'resolver_preload: {');
    for (const [pub, jwt] of Object.entries(a.accounts)) out.push(`  ${pub}: ${q(jwt)}`);
    out.push('}');
  }
  return `${out.join('\n')}\n`;
}

// ---- Kafka SASL_SSL ----

export interface KafkaSecurity {
  readonly tls: Pick<TlsMaterial, 'caFile' | 'serverBundleFile'>;
  /** SCRAM users, created at format time (`kafka-storage format --add-scram`). */
  readonly scramUsers: readonly { readonly name: string; readonly password: string; readonly mechanism: 'SCRAM-SHA-256' | 'SCRAM-SHA-512' }[];
  /** PLAIN users (the broker's JAAS configuration). */
  readonly plainUsers: readonly { readonly name: string; readonly password: string }[];
  /** The broker's own SCRAM-SHA-512 user (inter-broker listener). */
  readonly brokerUser: { readonly name: string; readonly password: string };
}

/** server.properties lines of a broker whose client (and inter-broker) listener speaks `protocol`; the controller is PLAINTEXT on 127.0.0.1. */
export function kafkaListenerProperties(protocol: 'PLAINTEXT' | 'SASL_SSL', port: number, controllerPort: number): string[] {
  return [
    `listeners=${protocol}://127.0.0.1:${port},CONTROLLER://127.0.0.1:${controllerPort}`,
    `advertised.listeners=${protocol}://127.0.0.1:${port}`,
    `listener.security.protocol.map=${protocol}:${protocol},CONTROLLER:PLAINTEXT`,
    `inter.broker.listener.name=${protocol}`,
  ];
}

/** server.properties lines for a SASL_SSL client listener. */
export function kafkaSecureProperties(s: KafkaSecurity, port: number, controllerPort: number): string[] {
  const plainUsers = [s.brokerUser, ...s.plainUsers].map((u) => `user_${u.name}="${u.password}"`).join(' ');
  return [
    ...kafkaListenerProperties('SASL_SSL', port, controllerPort),
    'sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,PLAIN',
    'sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512',
    `listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="${s.brokerUser.name}" password="${s.brokerUser.password}";`,
    'listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;',
    `listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="${s.brokerUser.name}" password="${s.brokerUser.password}" ${plainUsers};`,
    'ssl.keystore.type=PEM',
    `ssl.keystore.location=${s.tls.serverBundleFile}`,
    'ssl.truststore.type=PEM',
    `ssl.truststore.location=${s.tls.caFile}`,
    // Client certificates are accepted when offered (mutual TLS works) but SASL is what authenticates.
    'ssl.client.auth=requested',
    'ssl.endpoint.identification.algorithm=https',
  ];
}

/** `--add-scram` arguments for `kafka-storage format`. */
export function kafkaScramFormatArgs(s: KafkaSecurity): string[] {
  const users = [{ ...s.brokerUser, mechanism: 'SCRAM-SHA-512' as const }, ...s.scramUsers];
  return users.flatMap((u) => ['--add-scram', `${u.mechanism}=[name=${u.name},password=${u.password}]`]);
}

// ---- A secured deployment: what `infra up --secure` and `npm start -- --secure` run ----

export type SecureDeployment = ReturnType<typeof secureDeployment>;

/** Kafka users of a deployment: the outcome service and the operators' tools (replay, the job). */
export const KAFKA_USERS = ['outcome', 'admin'] as const;

function secretIn(dir: string, name: string): string {
  const path = join(dir, name);
  if (existsSync(path)) return readFileSync(path, 'utf8').trim();
  const s = randomSecret();
  writeSecretFile(path, `${s}\n`);
  return s;
}

/**
 * Certificates, one NATS user per role and the Kafka users under `dir`, made once and kept
 * (a Kafka broker's SCRAM users are created when its data directory is formatted, so the
 * passwords must outlive a restart). Secret files are `dir/secrets/*.password`, mode 0600.
 */
export function secureDeployment(dir: string, pools: readonly SecurePool[]) {
  const tls = ensureTlsMaterial(join(dir, 'tls'));
  const secrets = join(dir, 'secrets');
  mkdirSync(secrets, { recursive: true, mode: 0o700 });
  const roles = rolePermissions(pools);
  const natsPasswords = new Map(roles.map((r) => [r.role, secretIn(secrets, `nats-${r.role}.password`)]));
  const kafkaPasswords = new Map(KAFKA_USERS.map((u) => [u as string, secretIn(secrets, `kafka-${u}.password`)]));
  const brokerPassword = secretIn(secrets, 'kafka-broker.password');
  return {
    dir,
    tls,
    roles,
    /** nats-server security: TLS with client certificates required, one password user per role. */
    nats: {
      tls: { material: tls, verify: true },
      auth: { kind: 'users', users: roles.map((r) => ({ name: r.role, auth: { kind: 'password', password: natsPasswords.get(r.role)! }, permissions: r })) },
    } satisfies NatsSecurity,
    kafka: {
      tls,
      scramUsers: KAFKA_USERS.map((u) => ({ name: u, password: kafkaPasswords.get(u)!, mechanism: 'SCRAM-SHA-512' })),
      plainUsers: [],
      brokerUser: { name: 'broker', password: brokerPassword },
    } satisfies KafkaSecurity,
    /** VANTAGE_NATS_* settings of a role (user, password file, mutual TLS). */
    natsEnv(role: string): Record<string, string> {
      if (!natsPasswords.has(role)) throw new Error(`no NATS role ${role}`);
      return {
        VANTAGE_NATS_USER: role,
        VANTAGE_NATS_PASSWORD_FILE: join(secrets, `nats-${role}.password`),
        VANTAGE_NATS_TLS_CA_FILE: tls.caFile,
        VANTAGE_NATS_TLS_CERT_FILE: tls.clientCertFile,
        VANTAGE_NATS_TLS_KEY_FILE: tls.clientKeyFile,
      };
    },
    /** VANTAGE_KAFKA_* settings of a Kafka user (SASL_SSL, SCRAM-SHA-512). */
    kafkaEnv(user: string): Record<string, string> {
      if (!kafkaPasswords.has(user)) throw new Error(`no Kafka user ${user}`);
      return {
        VANTAGE_KAFKA_SSL_CA_FILE: tls.caFile,
        VANTAGE_KAFKA_SASL_MECHANISM: 'scram-sha-512',
        VANTAGE_KAFKA_SASL_USERNAME: user,
        VANTAGE_KAFKA_SASL_PASSWORD_FILE: join(secrets, `kafka-${user}.password`),
      };
    },
  };
}

/** The main job's pools as the secured deployment sees them (namespace `dynamo`, component = pool). */
export const JOB_POOLS: readonly SecurePool[] = [
  { name: 'efficient', namespace: 'dynamo', component: 'efficient' },
  { name: 'capable', namespace: 'dynamo', component: 'capable' },
];

// ---- The operators' example (infra/secure/), generated from the same permission set ----

/** Environment variable nats-server reads a role's password from in the example (`VANTAGE_PW_INDEXER_EFFICIENT`). */
function examplePasswordVariable(role: string): string {
  return `VANTAGE_PW_${role.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;
}

/**
 * `infra/secure/nats-server.conf`: the job's pools, TLS with client certificates from
 * `/etc/nats/tls/`, one user per role with its password from the server's environment.
 * `npm run secure:example` rewrites it; a unit test keeps it equal to this.
 */
export function exampleNatsConfig(): string {
  const roles = rolePermissions(JOB_POOLS);
  const material = { caFile: '/etc/nats/tls/ca.pem', serverCertFile: '/etc/nats/tls/server.pem', serverKeyFile: '/etc/nats/tls/server.key' };
  const body = natsServerConfig({
    port: 4222,
    monitorPort: 8222,
    storeDir: '/var/lib/nats',
    serverName: 'vantage-nats-1',
    tls: { material, verify: true },
    auth: { kind: 'users', users: roles.map((r) => ({ name: r.role, auth: { kind: 'password-env', variable: examplePasswordVariable(r.role) }, permissions: r })) },
  });
  const header = [
    '# Least-privilege NATS configuration for vantage beside a Dynamo fleet (generated from',
    '# infra/src/secure.ts by `npm run secure:example`; infra/secure/README.md explains every line).',
    '# Passwords come from the server\'s environment (VANTAGE_PW_<ROLE>); prefer bcrypt hashes',
    '# (`nats server passwd`) in production. Listening on 127.0.0.1: change `listen` for your network.',
    ...roles.map((r) => `#   ${r.role.padEnd(18)} ${r.what}`),
    '',
  ];
  return `${header.join('\n')}${body}`;
}

/** `infra/secure/kafka-sasl-ssl.properties`: the listener part of a broker's server.properties. */
export function exampleKafkaProperties(): string {
  const lines = kafkaSecureProperties(
    {
      tls: { caFile: '/etc/kafka/tls/ca.pem', serverBundleFile: '/etc/kafka/tls/server-bundle.pem' },
      scramUsers: [],
      plainUsers: [],
      brokerUser: { name: 'broker', password: '<broker-password>' },
    },
    9092,
    9093,
  ).filter((l) => !l.startsWith('listener.name.sasl_ssl.plain.'));
  return [
    '# SASL_SSL client listener for the vantage outcome service and tools (generated from',
    '# infra/src/secure.ts by `npm run secure:example`). SCRAM users are created when the data',
    '# directory is formatted:',
    '#   kafka-storage format -t <cluster-id> -c server.properties \\',
    "#     --add-scram 'SCRAM-SHA-512=[name=broker,password=...]' \\",
    "#     --add-scram 'SCRAM-SHA-512=[name=outcome,password=...]' --add-scram 'SCRAM-SHA-512=[name=admin,password=...]'",
    '# or later with kafka-configs --alter --add-config SCRAM-SHA-512=[password=...] --entity-type users.',
    '# Replace <broker-password> with the broker user\'s (or use a Kafka config provider), and keep the file mode 0600.',
    ...lines.map((l) => (l.startsWith('sasl.enabled.mechanisms=') ? 'sasl.enabled.mechanisms=SCRAM-SHA-512' : l)),
    '',
  ].join('\n');
}
