/**
 * Intake from JetStream: one pull loop per stream (decisions, lifecycle) of
 * the shared durable consumers, feeding the leader term's inbox. The term says
 * how much it has room for (backpressure: JetStream keeps the rest) and when
 * to stop.
 */
import { jetstream, type Consumer as JsConsumer, type JsMsg, type JetStreamClient } from '@nats-io/jetstream';
import type { Logger, NatsConnection } from '@vantage/runtime';
import type { OutcomeConfig } from './config';
import { setTimeout as sleep } from 'node:timers/promises';
import type { OutcomeMetrics } from './metrics';

export type Kind = 'decision' | 'lifecycle';

/** The parts of a JetStream message the service uses (a `JsMsg` has them). */
export type SourceMsg = Pick<JsMsg, 'data' | 'subject' | 'seq' | 'ack' | 'nak'>;

/** One delivery of a JetStream message, and until when this instance may still write it. */
export interface Held {
  msg: SourceMsg;
  /**
   * Local receive time + ack_wait / 2. Before this instant the server cannot
   * have redelivered the message to anyone else, so a transaction committed
   * before it is the only writer of the message (README, "ownership").
   */
  ownedUntilMs: number;
  /** Stream sequence (from the delivery info, parsed once). */
  seq: number;
}

/** A fetched message waiting in the inbox; it is also its own `Held` handle (one object per message). */
export interface InboxItem extends Held {
  kind: Kind;
  stream: string;
  receivedAtMs: number;
  redelivered: boolean;
  publishMs: number;
}

/** The leader term as intake sees it. */
export interface IntakeSink {
  /** The term is over: stop pulling. */
  readonly stopping: boolean;
  /** Messages that may be pulled now (0: paused by backpressure). */
  room(): number;
  /** One delivery; `pending` is the consumer's count of messages not yet delivered. */
  take(item: InboxItem, pending: number): void;
  /** A pull ended with `got` messages (0: the stream is caught up). */
  pulled(stream: string, got: number): void;
}

/** Intake as a leader term uses it. */
export interface TermIntake {
  /** Pulls into `sink` until it is stopping. */
  run(sink: IntakeSink): Promise<void>;
  /** Sends what was acked or nak'ed so far. */
  flush(): Promise<void>;
}

type FetchState = { state: string; sinceMs: number; fetched: number; lastError?: string };

export class JetStreamIntake implements TermIntake {
  /** Per stream: where its loop is, for the stall report. */
  readonly fetchState: Record<string, FetchState> = {};
  private readonly js: JetStreamClient;
  private readonly ownershipMs: number;

  constructor(private readonly nc: NatsConnection, private readonly streams: readonly { kind: Kind; stream: string }[], private readonly o: OutcomeConfig['outcome'], private readonly metrics: OutcomeMetrics, private readonly log: Logger) {
    this.js = jetstream(nc);
    this.ownershipMs = Math.floor(o.nats.ackWaitMs / 2);
  }

  async run(sink: IntakeSink): Promise<void> {
    await Promise.all(this.streams.map((s) => this.loop(s.kind, s.stream, sink)));
  }

  async flush(): Promise<void> {
    await this.nc.flush().catch(() => {});
  }

  private async loop(kind: Kind, stream: string, sink: IntakeSink): Promise<void> {
    const { o, metrics } = this;
    let consumer: JsConsumer | undefined;
    const st: FetchState = (this.fetchState[stream] = { state: 'starting', sinceMs: Date.now(), fetched: 0 });
    const set = (state: string): void => {
      if (st.state !== state) {
        st.state = state;
        st.sinceMs = Date.now();
      }
    };
    while (!sink.stopping) {
      const room = sink.room();
      if (room <= 0) {
        // Backpressure: Kafka slow or down, or too many open joins. Stop
        // pulling; JetStream keeps the messages.
        metrics.fetchPaused.set(1);
        set('paused');
        await sleep(5);
        continue;
      }
      metrics.fetchPaused.set(0);
      try {
        set('consumer');
        consumer ??= await this.js.consumers.get(stream, o.nats.durable);
        set('fetching');
        const iter = await consumer.fetch({ max_messages: room, expires: o.nats.fetchExpiresMs, idle_heartbeat: Math.max(500, Math.floor(o.nats.fetchExpiresMs / 2)) });
        let got = 0;
        // A pull request lost in a server restart can leave the iterator
        // waiting forever; a fetch never legitimately outlives its expiry by much.
        const watchdog = setTimeout(() => void iter.stop(), o.nats.fetchExpiresMs * 2 + 2_000);
        try {
          for await (const m of iter) {
            if (sink.stopping) {
              // Term over (lost lease or shutdown): the pull still delivers; give it straight back.
              m.nak();
              continue;
            }
            const info = m.info;
            const receivedAtMs = Date.now();
            got++;
            st.fetched++;
            sink.take(
              { kind, stream, msg: m, receivedAtMs, ownedUntilMs: receivedAtMs + this.ownershipMs, seq: info.streamSequence, redelivered: info.deliveryCount > 1, publishMs: Math.floor(info.timestampNanos / 1_000_000) },
              info.pending,
            );
          }
        } finally {
          clearTimeout(watchdog);
        }
        sink.pulled(stream, got);
      } catch (e) {
        if (sink.stopping) break;
        this.log.debug({ err: e, stream }, 'fetch failed; retrying');
        set('error');
        st.lastError = e instanceof Error ? e.message : String(e);
        consumer = undefined;
        await sleep(250);
      }
    }
  }
}
