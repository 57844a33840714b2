/** MCP tools in the request: defined after the built-in tools, their schemas verbatim. */
import { describe, it, expect } from '@jest/globals';
import type Anthropic from '@anthropic-ai/sdk';
import { create } from '@bufbuild/protobuf';
import { McpToolDefinitionSchema } from '@bedrock/contracts';
import { buildMessagesRequest } from './build-request.ts';
import { makeJob, runOptions } from '../test/helpers.ts';

const options = runOptions();
const def = (name: string, schema: string) =>
  create(McpToolDefinitionSchema, { name, description: `the ${name} tool`, inputSchemaJson: schema });
const schema = { type: 'object', properties: { message: { type: 'string', description: 'x' } }, required: ['message'], $defs: { a: {} } };

describe('MCP tools in a request', () => {
  it('defines them after the built-in tools with their schemas as given; a schema that is not an object is left out', async () => {
    const job = {
      ...makeJob({ toolNames: ['bash'] }),
      mcpTools: [def('mcp__e__echo', JSON.stringify(schema)), def('mcp__e__broken', '[1]'), def('mcp__e__bare', '{"properties": {}}')],
    };
    const params = await buildMessagesRequest(job, options);
    const tools = params.tools as Anthropic.Tool[];
    expect(tools.map((t) => t.name)).toEqual(['bash', 'mcp__e__echo', 'mcp__e__bare']);
    expect(tools[1]).toEqual({ name: 'mcp__e__echo', description: 'the mcp__e__echo tool', input_schema: schema });
    expect(tools[2]!.input_schema).toEqual({ type: 'object', properties: {} });
  });

  it('a request that offers no tools offers no MCP tools either', async () => {
    const params = await buildMessagesRequest({ ...makeJob({ toolNames: [] }), mcpTools: [def('mcp__e__echo', '{}')] }, options);
    expect(params.tools).toBeUndefined();
  });
});
