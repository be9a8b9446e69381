/**
 * /healthz tells the truth about decision records (issue 25, items 7 and 8): with the decisions
 * stream deleted under load the service turns unhealthy with the reason, makes the stream again
 * (name and subjects, as at start) and turns healthy once records flow; with the stream full and
 * discarding new messages (it refuses every record past its limit), a full record queue and a shutdown with records left are counted, and every route is
 * accounted for (published + refused by the full queue + left at shutdown). Routes are answered
 * throughout: publishing never blocks the reply.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DiscardPolicy, jetstreamManager } from '@nats-io/jetstream';
import { afterAll, describe, expect, it } from 'vitest';
import type { RouteArgs } from '@vantage/gateway-client';
import { eventually, uniqueName } from '@vantage/testkit';
import type { WorkerId } from '@vantage/types';
import { BLOCK, Harness, parameterSet, tokens } from './harness';

interface Health {
  status: number;
  body: { ok: boolean; details: Record<string, Record<string, unknown>> };
}

async function health(port: number): Promise<Health> {
  const res = await fetch(`http://127.0.0.1:${port}/healthz`);
  return { status: res.status, body: (await res.json()) as Health['body'] };
}

function metric(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

const dir = mkdtempSync(join(tmpdir(), 'vantage-decision-health-'));
const prompt = tokens(8 * BLOCK, 3);
let seq = 0;
const args = (): RouteArgs => ({
  requestId: `${uniqueName('req')}-${++seq}`,
  sessionId: 's',
  stageProposal: 'efficient',
  prompts: { efficient: { tokenIds: prompt }, capable: { tokenIds: prompt } },
});

async function started(h: Harness): Promise<void> {
  await h.start(parameterSet({ effModel: 'model-8b', capModel: 'model-70b' }));
  await h.seedWorkers(101n as WorkerId, 102n as WorkerId, h.client.hashPrompt('efficient', prompt), 4);
}

describe('decision: /healthz and the decision-record publisher', () => {
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('turns unhealthy when the decisions stream is deleted under load, and healthy again once records flow', { timeout: 90_000 }, async () => {
    const h = new Harness(join(dir, 'p1.json'), { decisionEnv: { VANTAGE_DECISION_RECORDS_UNHEALTHY_FAILING_MS: '500', VANTAGE_DECISION_RECORDS_RETRY_MAX_MS: '200', VANTAGE_DECISION_RECORDS_PUBLISH_TIMEOUT_MS: '500' } });
    try {
      await started(h);
      const port = h.decision.opsPort;
      let routes = 0;
      let failed = 0;
      let stop = false;
      const load = (async () => {
        while (!stop) {
          await h.client.route(args()).then(
            () => routes++,
            () => failed++,
          );
          await new Promise((r) => setTimeout(r, 10));
        }
      })();
      await eventually('records published', () => h.handle.publisher!.published > 20, 10_000);
      expect((await health(port)).status).toBe(200);

      const jsm = await jetstreamManager(h.nc);
      await jsm.streams.delete(h.recordsStream);
      let bad: Health | undefined;
      await eventually(
        'unhealthy with the reason',
        async () => {
          const x = await health(port);
          if (x.status === 503) bad = x;
          return bad !== undefined;
        },
        20_000,
        25,
      );
      const reason = String(bad!.body.details['decision']!['reason']);
      expect(reason).toMatch(/failing to publish/);
      // The service makes the stream again and the held records go out.
      await eventually('healthy again', async () => (await health(port)).status === 200, 30_000, 100);
      const info = await jsm.streams.info(h.recordsStream);
      stop = true;
      await load;
      await eventually('queue drained', () => h.handle.publisher!.depth === 0, 20_000);
      expect(failed).toBe(0);
      // Every route answered had its record stored once (the ones held during the outage included), counting those
      // stored before the deletion: published = routes; the new stream holds those published after it.
      expect(h.handle.publisher!.published).toBe(routes);
      expect(info.config.subjects).toEqual([h.recordsSubject]);
      console.log(`[health] decision: unhealthy with "${reason}"; ${routes} routes answered, all records published, ${h.handle.publisher!.failures} failed attempts retried`);
    } finally {
      await h.stop();
    }
  });

  it('counts records refused by a full queue and those left at shutdown; every route is accounted for', { timeout: 90_000 }, async () => {
    const h = new Harness(join(dir, 'p2.json'), {
      decisionEnv: {
        VANTAGE_DECISION_RECORDS_MAX_QUEUED: '5',
        VANTAGE_DECISION_RECORDS_MAX_IN_FLIGHT: '2',
        VANTAGE_DECISION_RECORDS_UNHEALTHY_QUEUED: '3',
        VANTAGE_DECISION_RECORDS_RETRY_MAX_MS: '200',
        VANTAGE_DECISION_RECORDS_PUBLISH_TIMEOUT_MS: '300',
      },
    });
    try {
      await started(h);
      const port = h.decision.opsPort;
      const jsm = await jetstreamManager(h.nc);
      // The stream full, discarding new messages (issue 25, item 8): each publish past the first is refused
      // ("maximum messages exceeded"), the publisher holds and retries the records, and its queue fills.
      await jsm.streams.delete(h.recordsStream);
      await jsm.streams.add({ name: h.recordsStream, subjects: [h.recordsSubject], max_msgs: 1, discard: DiscardPolicy.New });
      const N = 30;
      for (let i = 0; i < N; i++) await h.client.route(args());
      await eventually('queue full refusals counted', async () => metric(await h.decision.ctx.registry.metrics(), 'vantage_decision_records_dropped_total', { cause: 'queue_full' }) > 0, 10_000);
      const hx = await health(port);
      expect(hx.status, JSON.stringify(hx.body)).toBe(503);
      expect(String(hx.body.details['decision']!['reason'])).toMatch(/queued/);
      const published = h.handle.publisher!.published;
      const text = await h.decision.ctx.registry.metrics();
      const queueFull = metric(text, 'vantage_decision_records_dropped_total', { cause: 'queue_full' });
      const registry = h.decision.ctx.registry;
      await h.decision.stop('test');
      const after = await registry.metrics();
      const leftAtShutdown = metric(after, 'vantage_decision_records_dropped_total', { cause: 'shutdown' });
      console.log(`[health] decision: ${N} routes, ${published} records published (the full stream took 1), ${queueFull} refused by the full queue, ${leftAtShutdown} left at shutdown`);
      expect(queueFull).toBeGreaterThan(0);
      expect(leftAtShutdown).toBeGreaterThan(0);
      expect(published + queueFull + leftAtShutdown).toBe(N);
    } finally {
      await h.stop();
    }
  });
});
