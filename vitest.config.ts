import { defineConfig } from 'vitest/config';

// Two projects: `unit` is fast and broker-free (tests of benchmark code live beside it, under bench/); `integration` talks to a real
// nats-server and Kafka broker started by @vantage/testkit's global setup.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['packages/*/test/**/*.test.ts', 'services/*/test/**/*.test.ts', 'infra/test/**/*.test.ts', 'packages/*/bench/**/*.test.ts', 'services/*/bench/**/*.test.ts'],
          exclude: ['**/*.int.test.ts', '**/node_modules/**'],
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['packages/*/test/**/*.int.test.ts', 'services/*/test/**/*.int.test.ts', 'test/**/*.int.test.ts'],
          exclude: ['**/node_modules/**'],
          globalSetup: ['packages/testkit/src/global-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 120_000,
          // Broker-heavy files run one at a time: two cores, and restarts of shared brokers must not overlap.
          pool: 'forks',
          poolOptions: { forks: { singleFork: true } },
        },
      },
    ],
  },
});
