export { PoolIngest, BOOKING_ORIGIN_HEADER, discoveryStoreFor } from './ingest';
export { poolSchema, poolSourceProperties, recoverySchema, limitsSchema, type PoolConfig } from './config';
export { ingestMetrics, type IngestMetrics } from './metrics';
export { BOOKINGS_CHANNEL, type BookingEntered } from './diagnostics';
export * from './recovery';
export { WorkerQueryClient, type RecoveryTarget } from './worker-query';
export * from './messages';
