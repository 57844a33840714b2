import { describe, it, expect } from '@jest/globals';
import { costOf, createModelRegistry, DEFAULT_MODELS, FREE, OFFLINE_MODEL_ID } from './models.ts';

describe('model registry', () => {
  it('knows the offline model and current Claude models', () => {
    const r = createModelRegistry();
    expect(r.lookup(OFFLINE_MODEL_ID)).toMatchObject({
      contextWindow: 200_000,
      maxOutputTokens: 64_000,
      thinking: 'adaptive',
      prices: FREE,
      compaction: true,
      known: true,
    });
    expect(r.lookup('claude-sonnet-4-5')).toMatchObject({ contextWindow: 200_000, known: true });
    expect(r.lookup('claude-sonnet-4-5').compaction).toBeUndefined();
    expect(createModelRegistry({ 'claude-sonnet-5-5': { compaction: true } }).lookup('claude-sonnet-5-5').compaction).toBe(true);
    expect(createModelRegistry({ 'claude-sonnet-4-6': { compaction: false } }).lookup('claude-sonnet-4-6').compaction).toBeUndefined();
    expect(() => createModelRegistry({ 'claude-sonnet-4-6': { compaction: 'yes' } })).toThrow(/compaction must be true or false/);
    expect(r.lookup('claude-opus-4-6')).toMatchObject({ contextWindow: 1_000_000, maxOutputTokens: 128_000, known: true });
  });

  it('gives an unknown model the smallest known window and output limit (REQ-BED-022)', () => {
    const r = createModelRegistry({ 'tiny-model': { contextWindow: 8_000, maxOutputTokens: 1_024 } });
    expect(r.lookup('nobody-knows')).toMatchObject({
      contextWindow: 8_000,
      maxOutputTokens: 1_024,
      thinking: 'none',
      prices: FREE,
      known: false,
    });
    expect(createModelRegistry().lookup('nobody-knows')).toMatchObject({
      contextWindow: 200_000,
      maxOutputTokens: 64_000,
      thinking: 'none',
      prices: FREE,
      known: false,
    });
    expect(createModelRegistry().fallback.thinking).toBe('none');
  });

  it('applies a JSON override: a partial entry keeps the default of the field left out', () => {
    const r = createModelRegistry(JSON.stringify({ 'claude-haiku-4-5': { contextWindow: 100_000 } }));
    expect(r.lookup('claude-haiku-4-5')).toMatchObject({
      contextWindow: 100_000,
      maxOutputTokens: 64_000,
      thinking: 'budget',
      known: true,
    });
    expect(r.fallback.contextWindow).toBe(100_000);
    expect(r.list().length).toBe(Object.keys(DEFAULT_MODELS).length);
  });

  it('gives each default model its thinking form: Claude 5 and 4.6 adaptive, 4.5 budget, the offline model adaptive', () => {
    const forms = Object.fromEntries(
      createModelRegistry()
        .list()
        .map((m) => [m.id, m.thinking]),
    );
    expect(forms).toEqual({
      'bedrock-offline': 'adaptive',
      'claude-fable-5-1': 'adaptive',
      'claude-haiku-4-5': 'budget',
      'claude-haiku-4-5-20251001': 'budget',
      'claude-haiku-5-5': 'adaptive',
      'claude-opus-4-5': 'budget',
      'claude-opus-4-5-20251101': 'budget',
      'claude-opus-4-6': 'adaptive',
      'claude-opus-5': 'adaptive',
      'claude-opus-5-5': 'adaptive',
      'claude-sonnet-4-5': 'budget',
      'claude-sonnet-4-5-20250929': 'budget',
      'claude-sonnet-4-6': 'adaptive',
      'claude-sonnet-5': 'adaptive',
      'claude-sonnet-5-5': 'adaptive',
    });
  });

  it('takes thinking from an override: a default keeps its form unless overridden, a new model without it gets none', () => {
    const r = createModelRegistry({
      'claude-opus-4-6': { thinking: 'none' },
      'claude-haiku-4-5': { contextWindow: 150_000 },
      'proxy-thinker': { contextWindow: 32_000, maxOutputTokens: 8_192, thinking: 'budget' },
      'proxy-plain': { contextWindow: 32_000, maxOutputTokens: 8_192 },
    });
    expect(r.lookup('claude-opus-4-6')).toMatchObject({
      contextWindow: 1_000_000,
      maxOutputTokens: 128_000,
      thinking: 'none',
      known: true,
    });
    expect(r.lookup('claude-haiku-4-5').thinking).toBe('budget');
    expect(r.lookup('proxy-thinker').thinking).toBe('budget');
    expect(r.lookup('proxy-plain').thinking).toBe('none');
    expect(() => createModelRegistry({ x: { contextWindow: 1, maxOutputTokens: 1, thinking: 'deep' } })).toThrow(
      /"x": thinking must be one of adaptive, budget, none, got "deep"/,
    );
    expect(() => createModelRegistry({ 'claude-opus-5': { thinking: true } })).toThrow(/thinking must be one of/);
  });

  it('treats an empty override as none', () => {
    expect(createModelRegistry('  ').list()).toEqual(createModelRegistry().list());
    expect(createModelRegistry(null).lookup(OFFLINE_MODEL_ID).known).toBe(true);
  });

  it('rejects malformed overrides with a message naming the problem', () => {
    expect(() => createModelRegistry('{not json')).toThrow(/not valid JSON/);
    expect(() => createModelRegistry('[1]')).toThrow(/must be a JSON object/);
    expect(() => createModelRegistry({ x: { contextWindow: 10 } })).toThrow(/new model "x" must set maxOutputTokens/);
    expect(() => createModelRegistry({ x: { contextWindow: -1, maxOutputTokens: 1 } })).toThrow(/positive integer/);
    expect(() => createModelRegistry({ x: { contextWindow: 1, maxOutputTokens: 1, window: 3 } })).toThrow(/unknown field "window"/);
    expect(() => createModelRegistry({ x: 5 })).toThrow(/must be an object/);
  });

  it('prices every Claude model (published prices) and leaves the offline model free', () => {
    const r = createModelRegistry();
    for (const m of r.list()) {
      if (m.id === OFFLINE_MODEL_ID) expect(m.prices).toEqual(FREE);
      else expect(m.prices.input).toBeGreaterThan(0);
    }
    expect(r.lookup('claude-sonnet-4-5').prices).toMatchObject({
      input: 3,
      output: 15,
      cacheWrite: 3.75,
      cacheRead: 0.3,
      webSearch: 0.01,
      webFetch: 0,
    });
    expect(r.lookup('claude-opus-5-5').prices).toMatchObject({ input: 4, output: 20, cacheWrite: 5, cacheRead: 0.4 });
  });

  it('reckons a cost in whole micro-dollars, exactly for fractional prices', () => {
    const sonnet = createModelRegistry().lookup('claude-sonnet-4-5').prices;
    const usage = { inputTokens: 1_000, outputTokens: 2_000, cacheCreationInputTokens: 10_000, cacheReadInputTokens: 100_000 };
    // 1000×3 + 2000×15 + 10000×3.75 + 100000×0.3 = 3000 + 30000 + 37500 + 30000
    expect(costOf(usage, sonnet)).toBe(100_500);
    expect(costOf({ ...usage, webSearchRequests: 3, webFetchRequests: 2 }, sonnet)).toBe(100_500 + 30_000);
    // 7 tokens at $0.01/MTok is 0.07 µ$: rounds to 0; 70 tokens: 0.7 → 1.
    const haiku = createModelRegistry().lookup('claude-haiku-5-5').prices;
    expect(costOf({ inputTokens: 0, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 7 }, haiku)).toBe(0);
    expect(costOf({ inputTokens: 0, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 70 }, haiku)).toBe(1);
    expect(
      Number.isInteger(costOf({ inputTokens: 333, outputTokens: 77, cacheCreationInputTokens: 1, cacheReadInputTokens: 9 }, sonnet)),
    ).toBe(true);
  });

  it('takes prices from an override: some fields, the rest kept; a new model is free unless priced', () => {
    const r = createModelRegistry({
      'claude-haiku-4-5': { prices: { output: 6 } },
      [OFFLINE_MODEL_ID]: { prices: { input: 1, output: 2 } },
      'proxy-plain': { contextWindow: 32_000, maxOutputTokens: 8_192 },
    });
    expect(r.lookup('claude-haiku-4-5').prices).toMatchObject({ input: 1, output: 6, cacheRead: 0.1 });
    expect(r.lookup(OFFLINE_MODEL_ID).prices).toEqual({ ...FREE, input: 1, output: 2 });
    expect(r.lookup('proxy-plain').prices).toEqual(FREE);
    expect(() => createModelRegistry({ x: { contextWindow: 1, maxOutputTokens: 1, prices: { input: -1 } } })).toThrow(
      /prices.input must be a number >= 0/,
    );
    expect(() => createModelRegistry({ x: { contextWindow: 1, maxOutputTokens: 1, prices: { tokens: 1 } } })).toThrow(
      /unknown price "tokens"/,
    );
    expect(() => createModelRegistry({ x: { contextWindow: 1, maxOutputTokens: 1, prices: 3 } })).toThrow(/prices must be an object/);
  });
});

describe('prompt-cache prices', () => {
  it('prices every entry’s cache at the provider’s multiples of input: 5m write 1.25x, 1h write 2x, read 0.1x', () => {
    for (const [id, limits] of Object.entries(DEFAULT_MODELS)) {
      const p = limits.prices;
      expect([id, p.cacheWrite, p.cacheWrite1h, p.cacheRead]).toEqual([
        id,
        expect.closeTo(p.input * 1.25, 9),
        expect.closeTo(p.input * 2, 9),
        expect.closeTo(p.input * 0.1, 9),
      ]);
    }
  });

  it('costs every model to the micro-dollar with the 5-minute/1-hour split of cache writes', () => {
    // 1,000 input, 2,000 output, 1,000,000 cache writes of which 400,000 for an hour, 2,000,000 reads.
    const usage = {
      inputTokens: 1_000,
      outputTokens: 2_000,
      cacheCreationInputTokens: 1_000_000,
      cacheCreation1hInputTokens: 400_000,
      cacheReadInputTokens: 2_000_000,
    };
    const expected: Record<string, number> = {
      [OFFLINE_MODEL_ID]: 0,
      'claude-fable-5-1': 17_610_000,
      'claude-opus-5-5': 7_044_000,
      'claude-sonnet-5-5': 3_522_000,
      'claude-haiku-5-5': 176_100,
      'claude-opus-5': 8_805_000,
      'claude-sonnet-5': 3_522_000,
      'claude-opus-4-6': 8_805_000,
      'claude-sonnet-4-6': 5_283_000,
      'claude-opus-4-5': 8_805_000,
      'claude-opus-4-5-20251101': 8_805_000,
      'claude-sonnet-4-5': 5_283_000,
      'claude-sonnet-4-5-20250929': 5_283_000,
      'claude-haiku-4-5': 1_761_000,
      'claude-haiku-4-5-20251001': 1_761_000,
    };
    expect(Object.keys(expected).sort()).toEqual(Object.keys(DEFAULT_MODELS).sort());
    for (const [id, limits] of Object.entries(DEFAULT_MODELS)) expect([id, costOf(usage, limits.prices)]).toEqual([id, expected[id]]);
    // Without the split every write is a 5-minute one (responses stored before it existed).
    const { cacheCreation1hInputTokens: _oneHour, ...noSplit } = usage;
    void _oneHour;
    expect(costOf(noSplit, DEFAULT_MODELS['claude-haiku-4-5']!.prices)).toBe(1_000 + 10_000 + 1_250_000 + 200_000);
  });
});
