/**
 * Checks a tool input against its JSON schema from the static registry with ajv, and says
 * what is wrong in words the model can act on: each problem names the field by its path in
 * the input (`input.patches[0].operation`) and what it must be.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import type { JsonSchema } from '@bedrock/contracts';

// allErrors: report every problem at once (the model fixes them in one retry); verbose: the
// failing value, for "got integer"; strict: a registry schema with an unknown keyword fails loudly.
const ajv = new Ajv({ allErrors: true, verbose: true, strict: true });
const compiled = new WeakMap<JsonSchema, ValidateFunction>();

function compile(schema: JsonSchema): ValidateFunction {
  let validate = compiled.get(schema);
  if (!validate) {
    validate = ajv.compile(schema as object);
    compiled.set(schema, validate);
  }
  return validate;
}

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

/** `/patches/0/operation` → `input.patches[0].operation`. */
function pathOf(instancePath: string): string {
  let path = 'input';
  for (const raw of instancePath.split('/').slice(1)) {
    const segment = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    path += /^\d+$/.test(segment) ? `[${segment}]` : /^[A-Za-z_$][\w$]*$/.test(segment) ? `.${segment}` : `[${JSON.stringify(segment)}]`;
  }
  return path;
}

function describe(e: ErrorObject): string {
  const path = pathOf(e.instancePath);
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'type': {
      const type = String(p.type);
      return `${path} must be ${type === 'array' || type === 'object' || type === 'integer' ? 'an' : 'a'} ${type}, got ${typeOf(e.data)}`;
    }
    case 'enum':
      return `${path} must be one of ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    case 'required':
      return `${pathOf(`${e.instancePath}/${String(p.missingProperty)}`)} is required`;
    case 'additionalProperties':
      return `${pathOf(`${e.instancePath}/${String(p.additionalProperty)}`)} is not a known field`;
    case 'minLength':
      return p.limit === 1 ? `${path} must not be empty` : `${path} must have at least ${String(p.limit)} characters`;
    case 'minimum':
      return `${path} must be at least ${String(p.limit)}`;
    case 'maximum':
      return `${path} must be at most ${String(p.limit)}`;
    case 'minItems':
      return `${path} must have at least ${String(p.limit)} item${p.limit === 1 ? '' : 's'}`;
    case 'maxItems':
      return `${path} must have at most ${String(p.limit)} item${p.limit === 1 ? '' : 's'}`;
    default:
      return `${path} ${e.message ?? `fails ${e.keyword}`}`;
  }
}

/**
 * Compiles the schemas now, so that no tool call pays for it: ajv builds a validator as code
 * (about 40 ms for the first schema of a process, most of it ajv's own start; a few ms each after).
 */
export function prepareValidators(schemas: readonly JsonSchema[]): void {
  for (const schema of schemas) compile(schema);
}

/** Returns the problems found, empty when `value` is valid. */
export function validateInput(schema: JsonSchema, value: unknown): string[] {
  const validate = compile(schema);
  if (validate(value)) return [];
  return (validate.errors ?? []).map(describe);
}
