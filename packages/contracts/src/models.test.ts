import { describe, it, expect } from '@jest/globals';
import { createModelRegistry, DEFAULT_MODELS, OFFLINE_MODEL_ID } from './models.ts';

describe('model registry', () => {
  it('knows the offline model and current Claude models', () => {
    const r = createModelRegistry();
    expect(r.lookup(OFFLINE_MODEL_ID)).toEqual({ contextWindow: 200_000, maxOutputTokens: 64_000, known: true });
    expect(r.lookup('claude-sonnet-4-5')).toMatchObject({ contextWindow: 200_000, known: true });
    expect(r.lookup('claude-opus-4-6')).toMatchObject({ contextWindow: 1_000_000, maxOutputTokens: 128_000, known: true });
  });

  it('gives an unknown model the smallest known window and output limit (REQ-BED-022)', () => {
    const r = createModelRegistry({ 'tiny-model': { contextWindow: 8_000, maxOutputTokens: 1_024 } });
    expect(r.lookup('nobody-knows')).toEqual({ contextWindow: 8_000, maxOutputTokens: 1_024, known: false });
    expect(createModelRegistry().lookup('nobody-knows')).toEqual({ contextWindow: 200_000, maxOutputTokens: 64_000, known: false });
  });

  it('applies a JSON override: a partial entry keeps the default of the field left out', () => {
    const r = createModelRegistry(JSON.stringify({ 'claude-haiku-4-5': { contextWindow: 100_000 } }));
    expect(r.lookup('claude-haiku-4-5')).toEqual({ contextWindow: 100_000, maxOutputTokens: 64_000, known: true });
    expect(r.fallback.contextWindow).toBe(100_000);
    expect(r.list().length).toBe(Object.keys(DEFAULT_MODELS).length);
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
});
