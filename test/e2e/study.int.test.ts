/**
 * Seed 000's loop end to end over real brokers, small: the main job's own code
 * (infra's Stack and runJob) with the `tiny` calibration plan.
 *
 *   calibration on the simulated fleet through the decision service -> outcome records in Kafka
 *   -> `vantage replay` -> `vantage fit` -> versioned parameter set (+ one per variant)
 *   -> the decision service reloads it -> evaluation runs -> their decision records, read back
 *   from Kafka, carry the fitted version.
 * Then a second run under the fitted set itself: every decision record of it, read back from the
 * decisions topic, carries exactly the fitted version.
 *
 * A private nats-server (the services use the fixed `vantage.v1.*` subjects and stream names);
 * the shared Kafka with topics unique to this test.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { calibrationParameterSet } from '@vantage/evaluation';
import { defaultJobConfig, runJob, runNode, Stack, waitForParameterSet, writeParameterSet, type JobResult } from '@vantage/infra';
import { loadParameterSet, type ParameterSet } from '@vantage/rules';
import { kafkaBrokers, ownNats, uniqueName } from '@vantage/testkit';

const rows = (file: string): Record<string, unknown>[] =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

describe('calibration -> fit -> parameter set -> decision service, through Kafka', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vantage-study-'));
  const paramsFile = join(dir, 'params.json');
  const topics = { outcomes: uniqueName('outcomes'), decisions: uniqueName('decisions') };
  const brokers = kafkaBrokers().join(',');
  let nats: Awaited<ReturnType<typeof ownNats>>;
  let stack: Stack;
  let result: JobResult;
  const say = (m: string): void => {
    if (process.env['VANTAGE_TEST_VERBOSE']) process.stderr.write(`[study] ${m}\n`);
  };
  const config = {
    ...defaultJobConfig({}),
    preset: 'tiny' as const,
    attempts: 1,
    sessions: 2,
    maxContextTokens: 8192,
    bootstrap: 100,
    // Fixed competing traffic (the default is picked by the offline study), so every run has some.
    background: '4:6:6000:1:0.5',
    topics,
  };

  beforeAll(async () => {
    nats = await ownNats();
    writeParameterSet(paramsFile, calibrationParameterSet(config.destinationLimit, 'test'));
    stack = new Stack({
      natsUrl: nats.url,
      kafkaBrokers: brokers,
      paramsFile,
      logDir: join(dir, 'logs'),
      pools: {
        efficient: { name: 'efficient', component: 'efficient', speed: 1.0, workers: 2 },
        capable: { name: 'capable', component: 'capable', speed: 0.6, workers: 2 },
      },
      timeScale: config.timeScale,
      joinWindowMs: 3_000,
      extraEnv: {
        fleet: { VANTAGE_FLEET_LOAD_DEBOUNCE_MS: '10' },
        decision: { VANTAGE_DECISION_OBSERVE_TIMEOUT_MS: '500' },
        outcome: {
          VANTAGE_OUTCOME_TOPICS_OUTCOMES: topics.outcomes,
          VANTAGE_OUTCOME_TOPICS_DECISIONS: topics.decisions,
          VANTAGE_OUTCOME_TOPICS_DEAD_LETTER: uniqueName('dlq'),
          VANTAGE_OUTCOME_TOPICS_PROGRESS: uniqueName('progress'),
          VANTAGE_OUTCOME_TRANSACTIONAL_ID: uniqueName('outcome-tx'),
          VANTAGE_OUTCOME_TOPICS_PARTITIONS: '2',
        },
      },
      log: say,
    });
    await stack.start();
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
    await nats?.cleanup();
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it('fits a parameter set from calibration records in Kafka, and the decision service runs it', async () => {
    result = await runJob({
      natsUrl: nats.url,
      kafkaBrokers: brokers,
      log: say,
      paramsFile,
      decisionPort: () => stack.get('decision').port,
      restartFleet: () => stack.restart('fleet'),
      outDir: dir,
      config,
      maxEvaluationRuns: 2,
    });

    // Calibration went through Kafka: probes of both candidates, read back by the replay tool.
    const cal = rows(join(dir, 'calibration-outcomes.jsonl'));
    const probes = cal.filter((r) => typeof r['sessionId'] === 'string' && (r['sessionId'] as string).startsWith('cal:'));
    expect(probes.length).toBeGreaterThanOrEqual(34); // 20 runs x 2 candidates, a few may miss their observe budget
    // The Q grid is measured as its own set (no contention), apart from the contention conditions.
    expect(probes.filter((r) => (r['sessionId'] as string).endsWith(':qgrid')).length).toBeGreaterThanOrEqual(12); // 4 points x 2 repeats x 2 candidates
    expect(new Set(probes.map((r) => r['decision.finalChoice.role']))).toEqual(new Set(['efficient', 'capable']));
    expect(probes.every((r) => r['decision.parameterSetVersion'] === 'calibration-test' || String(r['decision.parameterSetVersion']).startsWith('calibration-'))).toBe(true);
    const loaded = probes.filter((r) => (r['sessionId'] as string).endsWith(':loaded') && (r['decision.observations.efficient.bookedRequests'] as number) > 0);
    expect(loaded.length).toBeGreaterThan(0); // background load was visible to the decision service

    // The fit wrote a versioned, valid parameter set and its report.
    const fitted = loadParameterSet(readFileSync(join(dir, 'params-fitted.json'), 'utf8'));
    expect(fitted.ok).toBe(true);
    const set = (fitted as { ok: true; value: ParameterSet }).value;
    expect(set.version).toBe(result.fittedVersion);
    expect(readFileSync(join(dir, 'fit-report.html'), 'utf8')).toContain('<html');
    expect(set.provenance?.['rows']).toBeGreaterThan(0);
    expect(set.provenance?.['qSource']).toBe('qset'); // Q from the Q set alone, never from a split

    // Evaluation runs: their decisions (inside the outcome records, from Kafka) carry <fitted>+<variant>.
    const evalRows = rows(join(dir, 'outcomes.jsonl')).filter((r) => typeof r['sessionId'] === 'string' && (r['sessionId'] as string).startsWith('eval:'));
    expect(evalRows.length).toBeGreaterThan(0);
    for (const r of evalRows) {
      expect(String(r['decision.parameterSetVersion'])).toMatch(new RegExp(`^${set.version.replace(/[.+]/g, '\\$&')}\\+(stage|count|count_prefill|blind|cache)$`));
    }
    // Competing traffic ran beside the sessions and reached Kafka as background records, timed from their
    // arrival: no decision, marked background, completed, with a TTFT.
    const bgRows = rows(join(dir, 'outcomes.jsonl')).filter((r) => typeof r['sessionId'] === 'string' && (r['sessionId'] as string).startsWith('evalbg:'));
    expect(bgRows.length).toBeGreaterThan(0);
    for (const r of bgRows) {
      expect(r['join.hasDecision']).toBe(false);
      expect(r['background']).toBe(true);
      expect(r['status']).toBe('completed');
      expect(typeof r['ttftMs']).toBe('number');
    }
    expect(readFileSync(result.report, 'utf8')).toContain('Effect on competing traffic');
  }, 240_000);

  it('a second run under the fitted set: its decision records carry exactly its version', async () => {
    const set = loadParameterSet(readFileSync(join(dir, 'params-fitted.json'), 'utf8'));
    if (!set.ok) throw new Error(set.errors.join('; '));
    const since = new Date(Date.now() - 1_000).toISOString();
    writeParameterSet(paramsFile, set.value);
    await waitForParameterSet(stack.get('decision').port, set.value.version);
    const summary = JSON.parse(
      (
        await runNode(
          ['services/fleet/src/loadgen.ts', '--sessions', '1', '--seed', '99', '--max-context', '8192', '--nats', nats.url, '--time-scale', String(config.timeScale), '--max-duration-ms', '60000'],
          'load',
        )
      )
        .trim()
        .split('\n')
        .pop()!,
    ) as { requests: number; completed: number };
    expect(summary.completed).toBe(summary.requests);
    const file = join(dir, 'decisions-second.jsonl');
    let decisions: Record<string, unknown>[] = [];
    const until = Date.now() + 30_000;
    while (Date.now() < until) {
      await runNode(['packages/cli/src/main.ts', 'replay', '--brokers', brokers, '--topic', topics.decisions, '--since', since, '--format', 'jsonl', '--out', file], 'replay');
      decisions = rows(file);
      if (decisions.length >= summary.requests) break;
      await new Promise((r) => setTimeout(r, 1_000));
    }
    expect(decisions.length).toBe(summary.requests);
    expect(new Set(decisions.map((d) => d['parameterSetVersion']))).toEqual(new Set([set.value.version]));
    expect(new Set(decisions.map((d) => d['variant']))).toEqual(new Set(['cache_aware']));
  }, 120_000);
});
