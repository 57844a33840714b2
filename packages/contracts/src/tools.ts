/**
 * The static tool registry: every tool's name, description and JSON input schema. Tool descriptions never
 * change with the conversation's mode (REQ-BED-017); the mode is announced to the agent by synthetic
 * messages and by tool errors instead. Pure data, so that the pure state machine, the gateway (which sends
 * the schemas) and the tool-runner (which validates inputs against them) share one definition.
 */

export type ToolName = 'bash' | 'patch' | 'keyword_search' | 'think' | 'spawn_agents' | 'submit_result' | 'request_mode_upgrade';

/** A JSON Schema (draft 2020-12 subset used by the Messages API `input_schema`). */
export interface JsonSchema {
  readonly type?: string;
  readonly description?: string;
  readonly properties?: Readonly<Record<string, JsonSchema>>;
  readonly required?: readonly string[];
  readonly items?: JsonSchema;
  readonly enum?: readonly unknown[];
  readonly minItems?: number;
  readonly maxItems?: number;
  readonly minimum?: number;
  readonly maximum?: number;
  readonly minLength?: number;
  readonly additionalProperties?: boolean;
}

export interface ToolDefinition {
  readonly name: ToolName;
  readonly description: string;
  readonly inputSchema: JsonSchema;
  /** Where it runs: on a tool-runner, or inside the conversation service itself. */
  readonly executor: 'tool-runner' | 'conversation';
}

/** bash: default and longest timeouts, in milliseconds. */
export const BASH_DEFAULT_TIMEOUT_MS = 120_000;
export const BASH_MAX_TIMEOUT_MS = 30 * 60_000;

/** The exact error REQ-PATCH-009 words for patch in Restricted mode. */
export const PATCH_RESTRICTED_ERROR = 'Patch tool is disabled in Restricted mode. Use request_mode_upgrade to request write access.';

/**
 * The registry. `satisfies` keeps each entry's `executor` literal, so the names each side runs
 * ({@link RunnerToolName}, {@link ConversationToolName}) are types the compiler checks dispatch tables against.
 */
const TOOL_TABLE = {
  bash: {
    name: 'bash',
    executor: 'tool-runner',
    description:
      "Run a shell command with `bash -c` in the conversation's working directory. " +
      '`cd` does not persist between calls. Stdin is closed. Stdout and stderr are combined; ' +
      'long output keeps its head and tail around a marker. A non-zero exit code is reported as an error. ' +
      `The default timeout is ${BASH_DEFAULT_TIMEOUT_MS / 1000}s; pass timeout_seconds (up to ${BASH_MAX_TIMEOUT_MS / 1000}) for longer commands. ` +
      'In Restricted mode the command runs in a kernel sandbox: the filesystem is read-only, there is no network, ' +
      "and writes fail with the kernel's error (EACCES/EPERM); use request_mode_upgrade if you need to write.",
    inputSchema: {
      type: 'object',
      properties: {
        command: { type: 'string', description: 'The command, run with bash -c.', minLength: 1 },
        timeout_seconds: {
          type: 'number',
          description: `Kill the command after this many seconds (default ${BASH_DEFAULT_TIMEOUT_MS / 1000}, at most ${BASH_MAX_TIMEOUT_MS / 1000}).`,
          minimum: 1,
          maximum: BASH_MAX_TIMEOUT_MS / 1000,
        },
      },
      required: ['command'],
      additionalProperties: false,
    },
  },
  patch: {
    name: 'patch',
    executor: 'tool-runner',
    description:
      'Edit one file. Operations: `replace` (old_text must match exactly once), `append_eof`, `prepend_bof`, ' +
      '`overwrite` (creates the file and its parent directories). All patches of one call apply to the original ' +
      'text, all or nothing. Paths are relative to the working directory. The result shows a unified diff. ' +
      'Disabled in Restricted mode.',
    inputSchema: {
      type: 'object',
      properties: {
        path: { type: 'string', description: 'File path, relative to the working directory or absolute.', minLength: 1 },
        patches: {
          type: 'array',
          minItems: 1,
          items: {
            type: 'object',
            properties: {
              operation: { type: 'string', enum: ['replace', 'append_eof', 'prepend_bof', 'overwrite'] },
              old_text: { type: 'string', description: 'replace: the exact text to replace (must occur once).' },
              new_text: { type: 'string', description: 'The text to insert or write.' },
            },
            required: ['operation', 'new_text'],
            additionalProperties: false,
          },
        },
      },
      required: ['path', 'patches'],
      additionalProperties: false,
    },
  },
  keyword_search: {
    name: 'keyword_search',
    executor: 'tool-runner',
    description:
      'Case-insensitive search of the repository (from its root, or the working directory outside a repository) ' +
      'for each term, with context lines. Terms with too many matches are dropped and reported; the total output is bounded.',
    inputSchema: {
      type: 'object',
      properties: {
        query: { type: 'string', description: 'What you are looking for, in words.' },
        search_terms: {
          type: 'array',
          description: 'Literal terms to search for, most specific first.',
          items: { type: 'string', minLength: 1 },
          minItems: 1,
          maxItems: 16,
        },
      },
      required: ['query', 'search_terms'],
      additionalProperties: false,
    },
  },
  think: {
    name: 'think',
    executor: 'tool-runner',
    description: 'Think out loud: record reasoning or a plan. No side effects.',
    inputSchema: {
      type: 'object',
      properties: { thoughts: { type: 'string' } },
      required: ['thoughts'],
      additionalProperties: false,
    },
  },
  spawn_agents: {
    name: 'spawn_agents',
    executor: 'conversation',
    description:
      'Run independent sub-agents in parallel, one per task. Each works in this working directory, in Restricted ' +
      'mode when the sandbox is available, and must call submit_result. Returns every result, failures included.',
    inputSchema: {
      type: 'object',
      properties: {
        tasks: {
          type: 'array',
          minItems: 1,
          maxItems: 8,
          items: {
            type: 'object',
            properties: { task: { type: 'string', description: 'A complete, self-contained instruction.', minLength: 1 } },
            required: ['task'],
            additionalProperties: false,
          },
        },
      },
      required: ['tasks'],
      additionalProperties: false,
    },
  },
  submit_result: {
    name: 'submit_result',
    executor: 'conversation',
    description: 'Submit your final result to the parent conversation. This ends your work.',
    inputSchema: {
      type: 'object',
      properties: {
        result: { type: 'string', description: 'Final result to return to parent conversation' },
        success: { type: 'boolean', description: 'Whether the task completed successfully (default true)' },
      },
      required: ['result'],
      additionalProperties: false,
    },
  },
  request_mode_upgrade: {
    name: 'request_mode_upgrade',
    executor: 'conversation',
    description: 'Request upgrade from Restricted to Unrestricted mode. Only available in Restricted mode. User must approve the request.',
    inputSchema: {
      type: 'object',
      properties: { reason: { type: 'string', description: 'Explanation of why write access is needed', minLength: 1 } },
      required: ['reason'],
      additionalProperties: false,
    },
  },
} satisfies Record<ToolName, ToolDefinition>;

export const TOOLS: Readonly<Record<ToolName, ToolDefinition>> = TOOL_TABLE;

type ToolsRunBy<E extends ToolDefinition['executor']> = {
  [K in ToolName]: (typeof TOOL_TABLE)[K]['executor'] extends E ? K : never;
}[ToolName];
/** The tools a tool-runner executes (`executor: 'tool-runner'`): its dispatch table is keyed by these. */
export type RunnerToolName = ToolsRunBy<'tool-runner'>;
/** The tools the conversation service's state machine answers itself (`executor: 'conversation'`). */
export type ConversationToolName = ToolsRunBy<'conversation'>;

const BASE_TOOLS: readonly ToolName[] = ['bash', 'patch', 'keyword_search', 'think'];
/** The four possible sets, built once: tool sets are asked for on every request and tool start. */
const TOOL_SETS = {
  subAgent: Object.freeze([...BASE_TOOLS, 'submit_result'] as ToolName[]),
  parentWithSandbox: Object.freeze([...BASE_TOOLS, 'spawn_agents', 'request_mode_upgrade'] as ToolName[]),
  parentWithoutSandbox: Object.freeze([...BASE_TOOLS, 'spawn_agents'] as ToolName[]),
};

/**
 * The tools a conversation is offered, fixed for its whole life (descriptions are static):
 * sub-agents get submit_result and never spawn_agents or request_mode_upgrade (REQ-BED-009,
 * REQ-BED-018); request_mode_upgrade is offered only where Restricted mode exists at all.
 */
export function toolSetFor(opts: { isSubAgent: boolean; sandboxAvailable: boolean }): readonly ToolName[] {
  if (opts.isSubAgent) return TOOL_SETS.subAgent;
  return opts.sandboxAvailable ? TOOL_SETS.parentWithSandbox : TOOL_SETS.parentWithoutSandbox;
}

export function isToolName(name: string): name is ToolName {
  return Object.prototype.hasOwnProperty.call(TOOLS, name);
}

export function isRunnerToolName(name: string): name is RunnerToolName {
  return isToolName(name) && TOOLS[name].executor === 'tool-runner';
}

export function isConversationToolName(name: string): name is ConversationToolName {
  return isToolName(name) && TOOLS[name].executor === 'conversation';
}
