/**
 * Copying to the clipboard: the Clipboard API where the page may use it (a secure context:
 * https, localhost, 127.0.0.1), else the older select-and-copy, which works on plain http too.
 * The button says "Copied" for a moment (and tells screen readers through its label).
 */
import { useEffect, useRef, useState } from 'preact/hooks';

export async function copyText(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const area = document.createElement('textarea');
    area.value = text;
    area.setAttribute('readonly', '');
    area.className = 'visually-hidden';
    document.body.append(area);
    area.select();
    try {
      return document.execCommand('copy');
    } catch {
      return false;
    } finally {
      area.remove();
    }
  }
}

const FEEDBACK_MS = 1500;

/** A copy button for DOM built outside Preact (the code blocks of rendered Markdown). */
export function codeCopyButton(text: () => string, label: string): HTMLButtonElement {
  const button = document.createElement('button');
  button.type = 'button';
  button.className = 'copy';
  button.textContent = 'Copy';
  button.setAttribute('aria-label', label);
  button.title = label;
  let timer: number | undefined;
  button.addEventListener('click', () => {
    void copyText(text()).then((ok) => {
      button.textContent = ok ? 'Copied' : 'Copy failed';
      button.dataset.copied = String(ok);
      window.clearTimeout(timer);
      timer = window.setTimeout(() => {
        button.textContent = 'Copy';
        delete button.dataset.copied;
      }, FEEDBACK_MS);
    });
  });
  return button;
}

export function CopyButton({ text, label }: { text: () => string; label: string }) {
  const [said, setSaid] = useState<'' | 'Copied' | 'Copy failed'>('');
  const timer = useRef<number | undefined>(undefined);
  useEffect(() => () => window.clearTimeout(timer.current), []);
  return (
    <button
      type="button"
      class="copy"
      aria-label={label}
      title={label}
      data-copied={said ? String(said === 'Copied') : undefined}
      onClick={() =>
        void copyText(text()).then((ok) => {
          setSaid(ok ? 'Copied' : 'Copy failed');
          window.clearTimeout(timer.current);
          timer.current = window.setTimeout(() => setSaid(''), FEEDBACK_MS);
        })
      }
    >
      {said || 'Copy'}
    </button>
  );
}
