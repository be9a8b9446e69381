/**
 * Our NATS subjects. The version is a subject token so that a breaking change
 * (v2) can run beside v1 during a rollout, each side subscribing to what it
 * speaks. Per-pool subjects put the pool last so that one wildcard
 * (`vantage.v1.lifecycle.*`) subscribes to every pool.
 */

export const PROTOCOL_VERSION = 1 as const;
export const SUBJECT_PREFIX = 'vantage.v1';

/** Request-reply to the decision service; replicas share a queue group (the decision service's `queueGroup`). */
export const ROUTE_SUBJECT = `${SUBJECT_PREFIX}.route`;
/** Decision records, captured by a JetStream stream (the decision service's `stream`). */
export const DECISIONS_SUBJECT = `${SUBJECT_PREFIX}.decisions`;

const POOL_SUBJECT_KINDS = ['observe', 'bookings', 'lifecycle', 'workers'] as const;
/**
 * - `observe`: request-reply to the indexer(s) of the pool (every replica may
 *   answer; callers take the first reply or use a queue group per deployment).
 * - `bookings`: reservation events, decision service → indexers (fan-out).
 * - `lifecycle`: gateway lifecycle events → indexers and outcome (fan-out).
 * - `workers`: worker registration and heartbeats with capacity (fan-out).
 */
type PoolSubjectKind = (typeof POOL_SUBJECT_KINDS)[number];

/**
 * A pool name is one NATS subject token: letters, digits, `_` and `-`, 1–64
 * characters. Dots would split it into several tokens and `*`, `>` or spaces
 * would turn a publish into a wildcard or an invalid subject.
 */
const POOL_RE = /^[A-Za-z0-9_-]{1,64}$/;
export const POOL_NAME_PATTERN = POOL_RE.source;

export function isValidPoolName(pool: unknown): pool is string {
  return typeof pool === 'string' && POOL_RE.test(pool);
}

/**
 * Subject of a per-pool message. Pool names come from validated configuration,
 * so an invalid one is a programming error and throws rather than publishing
 * to a subject nobody listens on.
 */
function poolSubject(kind: PoolSubjectKind, pool: string): string {
  if (!isValidPoolName(pool)) throw new RangeError(`invalid pool name ${JSON.stringify(pool)}: expected ${POOL_NAME_PATTERN}`);
  return `${SUBJECT_PREFIX}.${kind}.${pool}`;
}

export const observeSubject = (pool: string): string => poolSubject('observe', pool);
export const bookingsSubject = (pool: string): string => poolSubject('bookings', pool);
export const lifecycleSubject = (pool: string): string => poolSubject('lifecycle', pool);
export const workersSubject = (pool: string): string => poolSubject('workers', pool);
