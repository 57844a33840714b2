/**
 * The render options (--hide-thinking, --full, colour) and the ANSI styles the CLI writes, on
 * only where colour is wanted (wantsColor).
 */
/** How people's output looks. */
export interface RenderOptions {
  /** `show`: each message starts with its sequence number (`#12`), which `fork --at` takes. */
  readonly numbered?: boolean;
  /** Leave the model's thinking out (--hide-thinking). */
  readonly hideThinking?: boolean;
  /** ANSI styles on stdout: only when it is a terminal and NO_COLOR is not set (wantsColor). */
  readonly color?: boolean;
  /** ANSI styles on stderr (the state lines), by the same rule. */
  readonly errColor?: boolean;
  /** Every line of tool output, not a head and a tail (--full). */
  readonly full?: boolean;
}

/**
 * Whether a stream gets ANSI styles: never with NO_COLOR set (no-color.org), always with
 * FORCE_COLOR set (other than 0), else when it is a terminal.
 */
export function wantsColor(isTTY: boolean | undefined, env: NodeJS.ProcessEnv): boolean {
  if (env.NO_COLOR) return false;
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '0') return true;
  return Boolean(isTTY);
}

const STYLES = {
  dim: ['\x1b[2m', '\x1b[22m'],
  bold: ['\x1b[1m', '\x1b[22m'],
  red: ['\x1b[31m', '\x1b[39m'],
  green: ['\x1b[32m', '\x1b[39m'],
  yellow: ['\x1b[33m', '\x1b[39m'],
  cyan: ['\x1b[36m', '\x1b[39m'],
} as const;
type Style = keyof typeof STYLES;

/** `text` in a style when colour is on. */
export function paint(on: boolean | undefined, style: Style, text: string): string {
  return on && text ? `${STYLES[style][0]}${text}${STYLES[style][1]}` : text;
}

export function dim(text: string, options: RenderOptions): string {
  return paint(options.color, 'dim', text);
}
