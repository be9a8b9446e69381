export { PoolIngest, BOOKING_ORIGIN_HEADER, discoveryStoreFor } from './ingest';
export { poolSchema, poolSourceProperties, recoverySchema, limitsSchema, type PoolConfig } from './config';
export { ingestMetrics, type IngestMetrics } from './metrics';
export { BOOKINGS_CHANNEL, type BookingEntered } from './diagnostics';
export { recoveryMetrics } from './recovery';
export { WorkerQueryClient } from './worker-query';
export { decodeBooking } from './messages';
