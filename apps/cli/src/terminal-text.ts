/* eslint-disable no-control-regex -- matching terminal control characters is what this file is about */
/**
 * Text from the model, tools and the server, made safe for a terminal, which would obey escape sequences
 * in it (OSC 52 writes the clipboard, OSC 0/2 the title, CSI moves the cursor and erases): sequences are
 * removed whole (CSI, OSC, DCS, SOS, PM, APC, two-character ESC; 7- and 8-bit), then every other C0 and
 * C1 control, DEL and the carriage return; newline and tab stay. The CLI's own colours are kept
 * (terminalSafe). docs/cli.md, "Terminal controls in model and tool text".
 */

/** Sequences with a body ended by a string terminator (BEL for OSC, ESC \ or 8-bit ST), or by the end of the text. */
const STRING_SEQUENCE = /(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[\s\S]*?(?:\x07|\x1b\\|\x9c|$)/g;
/** Control sequences: ESC [ or 8-bit CSI, parameters, intermediates, a final byte. */
const CSI_SEQUENCE = /(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?/g;
/** Other escape sequences: ESC, intermediates, a final byte (e.g. ESC 7, ESC ( B, ESC c). */
const ESC_SEQUENCE = /\x1b[ -/]*[0-~]?/g;
/** Every C0 control but tab and newline, DEL, and every C1 control. */
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;

/** `text` without escape sequences and control characters (newline and tab stay). */
export function stripControls(text: string): string {
  // Fast path: nothing to strip in most text.
  if (!/[\x00-\x08\x0b-\x1f\x7f-\x9f]/.test(text)) return text;
  return text.replace(STRING_SEQUENCE, '').replace(CSI_SEQUENCE, '').replace(ESC_SEQUENCE, '').replace(CONTROL, '');
}

/** The SGR sequences the CLI itself writes (render-style.ts' STYLES): bold, dim, normal intensity, four colours, default colour. */
const OWN_SGR = /(\x1b\[(?:1|2|22|31|32|33|36|39)m)/;

/**
 * `text` cleaned by {@link stripControls}, keeping the CLI's own colour sequences: SGR sequences from a
 * fixed set (render-style.ts' STYLES), with everything between them cleaned.
 */
export function terminalSafe(text: string): string {
  if (!/[\x00-\x08\x0b-\x1f\x7f-\x9f]/.test(text)) return text;
  // split with a capture group: odd parts are the CLI's sequences, even parts the text between.
  return text
    .split(OWN_SGR)
    .map((part, i) => (i % 2 === 1 ? part : stripControls(part)))
    .join('');
}

/**
 * A copy of `value` (a protobuf message as protobuf-es builds it: plain objects, arrays, strings,
 * bigints, bytes) with every string cleaned by {@link stripControls}. Every server message is cleaned
 * so before it is rendered, so that a model's text cannot use even the CLI's own colours. JSON
 * carried in a string field keeps its escapes (`\u001b` stays six characters, harmless); what the
 * CLI prints after parsing it goes through {@link terminalSafe} at the output.
 */
export function cleanStrings<T>(value: T): T {
  if (typeof value === 'string') return stripControls(value) as T;
  if (value === null || typeof value !== 'object' || value instanceof Uint8Array) return value;
  if (Array.isArray(value)) return value.map((v: unknown) => cleanStrings(v)) as T;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) out[k] = k === '$typeName' ? v : cleanStrings(v);
  return out as T;
}
