/**
 * Prometheus metrics for hot paths, read by prom-client only when scraped: a prom-client labelled
 * `inc`/`observe` validates and hashes the label object on every call; here the caller keeps a
 * series and updating it is a plain addition or an array increment. `LazyHistogram` answers the
 * registry itself in prom-client's format (test/lazy-metrics.test.ts compares the exposition text).
 */
import { Counter, Gauge, type Histogram, type LabelValues, type Registry } from 'prom-client';

/** One labelled series of a lazy counter or gauge: its value `n` is read when scraped. */
export interface Series {
  readonly labels: LabelValues<string>;
  n: number;
}

const SEP = '\u0001';

function labelsOf(names: readonly string[], values: readonly string[]): LabelValues<string> {
  const labels: LabelValues<string> = {};
  for (let i = 0; i < names.length; i++) labels[names[i]!] = values[i] ?? '';
  return labels;
}

class SeriesSet<S extends { readonly labels: LabelValues<string> }> {
  readonly map = new Map<string, S>();
  constructor(
    private readonly names: readonly string[],
    private readonly make: (labels: LabelValues<string>) => S,
  ) {}

  get(values: readonly string[]): S {
    const key = values.length === 1 ? values[0]! : values.join(SEP);
    let s = this.map.get(key);
    if (s === undefined) {
      s = this.make(labelsOf(this.names, values));
      this.map.set(key, s);
    }
    return s;
  }
}

/**
 * A counter incremented with plain additions. Its series are plain numbers, copied into the
 * prom-client metric by its `collect()` when scraped (after `reset()`, `inc(labels, n)` leaves a
 * counter's or a gauge's series at exactly n).
 */
export class LazyCounter {
  readonly #set: SeriesSet<Series>;

  constructor(registry: Registry, name: string, help: string, labelNames: readonly string[] = [], Metric: typeof Counter | typeof Gauge = Counter) {
    const set = (this.#set = new SeriesSet<Series>(labelNames, (labels) => ({ labels, n: 0 })));
    new Metric({
      name,
      help,
      labelNames,
      registers: [registry],
      collect(this: Counter | Gauge) {
        this.reset();
        for (const s of set.map.values()) this.inc(s.labels, s.n);
      },
    });
  }

  /** The series of these label values, in `labelNames` order (keep it to skip the lookup). */
  series(...values: string[]): Series {
    return this.#set.get(values);
  }

  inc(...values: string[]): void {
    this.#set.get(values).n++;
  }
}

/** A gauge set with plain assignments (`series(...).n = v`); prom-client reads the series when scraped. */
export class LazyGauge extends LazyCounter {
  constructor(registry: Registry, name: string, help: string, labelNames: readonly string[] = []) {
    super(registry, name, help, labelNames, Gauge);
  }
}

/** One labelled series of a LazyHistogram. */
export class HistogramSeries {
  /** Per bucket (the last one: above every bound), not cumulative. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(
    readonly labels: LabelValues<string>,
    private readonly bounds: Float64Array,
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(v: number): void {
    if (!Number.isFinite(v)) return; // prom-client throws; a metric must never fail a route
    const b = this.bounds;
    let i = 0;
    while (i < b.length && v > b[i]!) i++;
    this.counts[i]!++;
    this.sum += v;
    this.count++;
  }
}

/**
 * A histogram whose observations are an array increment. Registered with the registry as a metric
 * of its own: `get()` and `getForPromString()` return what prom-client's Histogram returns for the
 * same observations, so the exposition text is the same.
 */
export class LazyHistogram {
  readonly name: string;
  readonly help: string;
  readonly #bounds: Float64Array;
  readonly #set: SeriesSet<HistogramSeries>;

  constructor(registry: Registry, name: string, help: string, labelNames: readonly string[], buckets: readonly number[]) {
    this.name = name;
    this.help = help;
    const bounds = (this.#bounds = Float64Array.from([...buckets].sort((a, b) => a - b)));
    this.#set = new SeriesSet(labelNames, (labels) => new HistogramSeries(labels, bounds));
    // The registry only needs name, get(), getForPromString() and reset(); it is typed for prom-client's classes.
    registry.registerMetric(this as unknown as Histogram);
  }

  series(...values: string[]): HistogramSeries {
    return this.#set.get(values);
  }

  observe(value: number, ...values: string[]): void {
    this.#set.get(values).observe(value);
  }

  reset(): void {
    for (const s of this.#set.map.values()) {
      s.counts.fill(0);
      s.sum = 0;
      s.count = 0;
    }
  }

  /** Buckets with `le` as their own label and the series' labels shared, as prom-client's getForPromString. */
  getForPromString(): Promise<HistogramValues> {
    const values: HistogramValue[] = [];
    const bucket = `${this.name}_bucket`;
    for (const s of this.#set.map.values()) {
      if (s.count === 0) continue; // prom-client lists a series from its first observation
      let acc = 0;
      for (let i = 0; i < this.#bounds.length; i++) {
        acc += s.counts[i]!;
        values.push({ labels: { le: this.#bounds[i]! }, sharedLabels: s.labels, value: acc, metricName: bucket, exemplar: null });
      }
      values.push({ labels: { le: '+Inf' }, sharedLabels: s.labels, value: s.count, metricName: bucket, exemplar: null });
      values.push({ labels: {}, sharedLabels: s.labels, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels: {}, sharedLabels: s.labels, value: s.count, metricName: `${this.name}_count` });
    }
    return Promise.resolve({ name: this.name, help: this.help, type: 'histogram', values, aggregator: 'sum' });
  }

  /** Labels merged (the series' and `le`), as prom-client's get(). */
  async get(): Promise<HistogramValues> {
    const m = await this.getForPromString();
    return { ...m, values: m.values.map((v) => ({ labels: { ...v.sharedLabels, ...v.labels }, value: v.value, metricName: v.metricName, exemplar: v.exemplar })) };
  }
}

interface HistogramValue {
  readonly labels: LabelValues<string>;
  readonly sharedLabels?: LabelValues<string>;
  readonly value: number;
  readonly metricName: string;
  /** null on buckets, absent on the sum and count, as prom-client without exemplars. */
  readonly exemplar?: null;
}

/** What a prom-client metric's get() returns (the registry reads these members). */
interface HistogramValues {
  readonly name: string;
  readonly help: string;
  readonly type: 'histogram';
  readonly values: HistogramValue[];
  readonly aggregator: 'sum';
}
