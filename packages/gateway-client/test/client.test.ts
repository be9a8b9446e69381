import { describe, expect, it } from 'vitest';
import type { NatsConnection } from '@nats-io/transport-node';
import { localBlockHashes } from '@vantage/hashing';
import { routeRequestCodec } from '@vantage/protocol';
import { GatewayClient } from '../src/index';

// encodeRoute and hashPrompt never touch the connection.
const nc = {} as NatsConnection;
const client = new GatewayClient({ nc, pools: { efficient: { model: 'a', pool: 'pa', blockSize: 16 }, capable: { model: 'b', pool: 'pb', blockSize: 32 } } });
const tokens = Uint32Array.from({ length: 100 }, (_, i) => i * 3);

describe('gateway client', () => {
  it('hashes each candidate at its own pool block size (Dynamo scheme)', () => {
    expect(client.hashPrompt('efficient', tokens)).toEqual(localBlockHashes(tokens, 16));
    expect(client.hashPrompt('capable', tokens)).toEqual(localBlockHashes(tokens, 32));
    expect(client.hashPrompt('capable', tokens, 'lora-x')).not.toEqual(localBlockHashes(tokens, 32));
  });
  it('encodes a valid route request with hashes by default, token ids on request', () => {
    const body = client.encodeRoute({ requestId: 'r1', sessionId: 's1', stageProposal: 'efficient', prompts: { efficient: { tokenIds: tokens }, capable: { tokenIds: tokens } }, deadlineMs: 20 });
    const r = routeRequestCodec.decode(body);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.value.candidates.efficient).toMatchObject({ model: 'a', pool: 'pa', promptTokens: 100, prompt: { kind: 'local_hashes' } });
    expect(r.value.candidates.capable.prompt.kind === 'local_hashes' && r.value.candidates.capable.prompt.localHashes.length).toBe(3);
    expect(r.value.deadlineMs).toBe(20);
    const ids = routeRequestCodec.decode(client.encodeRoute({ requestId: 'r2', sessionId: 's1', stageProposal: 'capable', sendTokenIds: true, prompts: { efficient: { tokenIds: tokens }, capable: { tokenIds: tokens } } }));
    expect(ids.ok && ids.value.candidates.efficient.prompt.kind).toBe('token_ids');
  });
});
