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

/** Per-pool subjects: who publishes what on each is the package README's "Subjects" table. */
type PoolSubjectKind = 'observe' | 'bookings' | 'lifecycle' | 'workers';

/** A pool name is one NATS subject token: dots would split it, `*`, `>` or spaces make a wildcard or an invalid subject. */
const POOL_RE = /^[A-Za-z0-9_-]{1,64}$/;
export const POOL_NAME_PATTERN = POOL_RE.source;

export function isValidPoolName(pool: unknown): pool is string {
  return typeof pool === 'string' && POOL_RE.test(pool);
}

/** Subject of a per-pool message; an invalid pool name (configuration is validated) throws rather than publishing where nobody listens. */
function poolSubject(kind: PoolSubjectKind, pool: string): string {
  if (!isValidPoolName(pool)) throw new RangeError(`invalid pool name ${JSON.stringify(pool)}: expected ${POOL_NAME_PATTERN}`);
  return `${SUBJECT_PREFIX}.${kind}.${pool}`;
}

export const observeSubject = (pool: string): string => poolSubject('observe', pool);
export const bookingsSubject = (pool: string): string => poolSubject('bookings', pool);
export const lifecycleSubject = (pool: string): string => poolSubject('lifecycle', pool);
export const workersSubject = (pool: string): string => poolSubject('workers', pool);
