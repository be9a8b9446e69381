/**
 * Step timings of the observe handler, published on a `node:diagnostics_channel` channel for a
 * subscriber in the same process (`bench/step-times.ts`), instead of patches applied for a run.
 * With nobody subscribed the handler checks `hasSubscribers` once per request and takes no
 * timestamps, so the live path costs one property read.
 *
 * One message per answered request (errors are not timed):
 *   decodeUs   from the handler's entry to the request decoded and its local hashes ready
 *   answerUs   from there to the reply encoded (the pool's observation with Dynamo's pick, the reply built and encoded)
 *   respondUs  handing the reply to the NATS client (the responder publishes it, then reports back)
 *   totalUs    the three together
 */
import { channel } from 'node:diagnostics_channel';

export const OBSERVE_STEPS_CHANNEL = 'vantage:indexer:observe-steps';

export interface ObserveSteps {
  readonly pool: string;
  readonly encoding: 'binary' | 'json';
  readonly requestBytes: number;
  readonly replyBytes: number;
  readonly decodeUs: number;
  readonly answerUs: number;
  readonly respondUs: number;
  readonly totalUs: number;
}

export const observeStepsChannel = channel(OBSERVE_STEPS_CHANNEL);

/** Timestamps (performance.now(), ms) of one request's steps, filled in by the handler while a subscriber listens. */
export interface StepStamps {
  start: number;
  decoded: number;
  encoding: 'binary' | 'json';
}

/** Publish one request's steps (`answered`, `responded`: the stamps after the reply was built and after it was handed over). */
export function publishObserveSteps(pool: string, s: StepStamps, requestBytes: number, replyBytes: number, answered: number, responded: number): void {
  const msg: ObserveSteps = {
    pool,
    encoding: s.encoding,
    requestBytes,
    replyBytes,
    decodeUs: (s.decoded - s.start) * 1000,
    answerUs: (answered - s.decoded) * 1000,
    respondUs: (responded - answered) * 1000,
    totalUs: (responded - s.start) * 1000,
  };
  observeStepsChannel.publish(msg);
}
