export { PoolIngest, BOOKING_ORIGIN_HEADER, discoveryStoreFor } from './ingest';
export { intakeProperties, jetstreamStalledMs, poolSchema, poolSourceProperties, rejectionLogIntervalMs, type PoolConfig } from './config';
export { ingestMetrics, type IngestMetrics } from './metrics';
export { BOOKINGS_CHANNEL, type BookingEntered } from './diagnostics';
export { recoveryMetrics } from './recovery';
export { WorkerQueryClient } from './worker-query';
export { decodeBooking } from './messages';
