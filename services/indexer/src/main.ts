/** Entry point: `node --import tsx services/indexer/src/main.ts` (configuration: see README). */
import { runService } from '@vantage/runtime';
import { indexerConfigSchema, type IndexerSettings } from './config';
import { startIndexer } from './service';

await runService<IndexerSettings, false>({
  name: 'indexer',
  schema: indexerConfigSchema,
  async start(ctx) {
    await startIndexer(ctx);
  },
});
