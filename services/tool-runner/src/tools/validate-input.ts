/**
 * Checks a tool input against its JSON schema from the static registry. The registry uses a
 * small subset of JSON Schema (type, properties, required, additionalProperties, items,
 * enum, minItems, maxItems, minimum, maximum, minLength), so this validates exactly that
 * subset and says what is wrong in words the model can act on.
 */
import type { JsonSchema } from '@bedrock/contracts';

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function matchesType(value: unknown, type: string): boolean {
  const actual = typeOf(value);
  return actual === type || (type === 'number' && actual === 'integer');
}

/** Returns the problems found, empty when `value` is valid. */
export function validateInput(schema: JsonSchema, value: unknown, path = 'input'): string[] {
  const problems: string[] = [];
  if (schema.type !== undefined && !matchesType(value, schema.type)) {
    return [`${path} must be ${schema.type === 'array' || schema.type === 'object' ? 'an' : 'a'} ${schema.type}, got ${typeOf(value)}`];
  }
  if (schema.enum !== undefined && !schema.enum.includes(value)) {
    problems.push(`${path} must be one of ${schema.enum.map((v) => JSON.stringify(v)).join(', ')}`);
  }
  if (typeof value === 'string' && schema.minLength !== undefined && [...value].length < schema.minLength) {
    problems.push(schema.minLength === 1 ? `${path} must not be empty` : `${path} must have at least ${schema.minLength} characters`);
  }
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) problems.push(`${path} must be a finite number`);
    if (schema.minimum !== undefined && value < schema.minimum) problems.push(`${path} must be at least ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) problems.push(`${path} must be at most ${schema.maximum}`);
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) problems.push(`${path} must have at least ${schema.minItems} item(s)`);
    if (schema.maxItems !== undefined && value.length > schema.maxItems) problems.push(`${path} must have at most ${schema.maxItems} items`);
    if (schema.items) value.forEach((item, i) => problems.push(...validateInput(schema.items as JsonSchema, item, `${path}[${i}]`)));
  }
  if (typeOf(value) === 'object') {
    const object = value as Record<string, unknown>;
    for (const name of schema.required ?? []) {
      if (!(name in object) || object[name] === undefined) problems.push(`${path}.${name} is required`);
    }
    const properties = schema.properties ?? {};
    for (const [name, item] of Object.entries(object)) {
      const propertySchema = properties[name];
      if (propertySchema) problems.push(...validateInput(propertySchema, item, `${path}.${name}`));
      else if (schema.additionalProperties === false) problems.push(`${path}.${name} is not a known field`);
    }
  }
  return problems;
}
