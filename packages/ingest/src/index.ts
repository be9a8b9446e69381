export { PoolIngest, BOOKING_ORIGIN_HEADER, discoveryStoreFor } from './ingest';
export { poolSchema, poolSourceProperties, recoverySchema, limitsSchema, type PoolConfig, type RecoveryConfig, type LimitsConfig } from './config';
export { ingestMetrics, type IngestMetrics } from './metrics';
export { WriterQueue } from './queue';
export { BOOKINGS_CHANNEL, type BookingEntered } from './diagnostics';
export { encodeSnapshot, decodeSnapshot, SNAPSHOT_VERSION, type SnapshotHeader } from './snapshot';
export * from './recovery';
export { WorkerQueryClient, type RecoveryTarget } from './worker-query';
export * from './messages';
