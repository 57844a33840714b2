import { describe, expect, it } from '@jest/globals';
import { TOOLS, toolSetFor, isToolName } from './tools.ts';

describe('tool registry', () => {
  it('names every tool by its key', () => {
    for (const [key, def] of Object.entries(TOOLS)) expect(def.name).toBe(key);
  });

  it('gives sub-agents submit_result and never spawn_agents or request_mode_upgrade', () => {
    for (const sandboxAvailable of [true, false]) {
      const set = toolSetFor({ isSubAgent: true, sandboxAvailable });
      expect(set).toContain('submit_result');
      expect(set).not.toContain('spawn_agents');
      expect(set).not.toContain('request_mode_upgrade');
    }
  });

  it('offers request_mode_upgrade to parents only where Restricted mode exists', () => {
    expect(toolSetFor({ isSubAgent: false, sandboxAvailable: true })).toContain('request_mode_upgrade');
    expect(toolSetFor({ isSubAgent: false, sandboxAvailable: false })).not.toContain('request_mode_upgrade');
    expect(toolSetFor({ isSubAgent: false, sandboxAvailable: true })).not.toContain('submit_result');
  });

  it('every required property is declared', () => {
    for (const def of Object.values(TOOLS)) {
      for (const r of def.inputSchema.required ?? []) expect(def.inputSchema.properties).toHaveProperty(r);
    }
    expect(isToolName('bash')).toBe(true);
    expect(isToolName('toString')).toBe(false);
  });
});
