/**
 * The agent's Markdown, rendered safely: marked turns it into HTML, DOMPurify keeps only harmless
 * elements and attributes, then links open apart and only http(s) and mailto addresses stay links.
 * Code blocks are highlighted by highlight.js and get a copy button. Growing answers are cut into
 * blocks by markdown-split.ts. docs/web-ui.md, "What the agent's text looks like".
 */
import DOMPurify from 'dompurify';
import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import diff from 'highlight.js/lib/languages/diff';
import go from 'highlight.js/lib/languages/go';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import python from 'highlight.js/lib/languages/python';
import rust from 'highlight.js/lib/languages/rust';
import shell from 'highlight.js/lib/languages/shell';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';
import { Marked, type Tokens } from 'marked';
import { codeCopyButton } from './copy.tsx';

// Only highlight.js's core and these, to keep the bundle small: what a coding agent shows most
// (aliases come along: sh, zsh, js, ts, py, rs, html, yml, …); each adds 0.2–8 KiB.
const LANGUAGES = { bash, diff, go, javascript, json, python, rust, shell, typescript, xml, yaml };
for (const [name, language] of Object.entries(LANGUAGES)) hljs.registerLanguage(name, language);

/** Code without a language is guessed only when short (guessing runs every grammar). */
const AUTO_DETECT_MAX = 4000;

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Highlighted HTML of a code block (token spans with hljs-* classes) and the language used, if any. */
export function highlight(code: string, lang: string): { html: string; language: string } {
  const wanted = lang.trim().split(/\s+/)[0]?.toLowerCase() ?? '';
  if (wanted && hljs.getLanguage(wanted)) {
    return { html: hljs.highlight(code, { language: wanted, ignoreIllegals: true }).value, language: wanted };
  }
  if (!wanted && code.length <= AUTO_DETECT_MAX) {
    const guess = hljs.highlightAuto(code);
    if (guess.language && guess.relevance >= 5) return { html: guess.value, language: guess.language };
  }
  return { html: escapeHtml(code), language: wanted };
}

const marked = new Marked({
  gfm: true,
  // A single newline is a line break, as people (and models) mean it in chat.
  breaks: true,
  renderer: {
    code({ text, lang }: Tokens.Code): string {
      const { html, language } = highlight(text, lang ?? '');
      const cls = language ? ` language-${escapeHtml(language)}` : '';
      return `<pre><code class="hljs${cls}" data-lang="${escapeHtml(language)}">${html}</code></pre>\n`;
    },
  },
});

/** No script, no style, no event handlers, no frames, no images (the page's CSP would refuse remote ones anyway). */
const ALLOWED_TAGS = [
  'a',
  'b',
  'blockquote',
  'br',
  'code',
  'del',
  'em',
  'h1',
  'h2',
  'h3',
  'h4',
  'h5',
  'h6',
  'hr',
  'i',
  'input',
  'li',
  'ol',
  'p',
  'pre',
  's',
  'span',
  'strong',
  'sub',
  'sup',
  'table',
  'tbody',
  'td',
  'th',
  'thead',
  'tr',
  'ul',
];
const ALLOWED_ATTR = ['href', 'title', 'class', 'align', 'start', 'type', 'checked', 'disabled', 'data-lang'];
const SAFE_HREF = /^(https?:|mailto:|#)/i;

let configured: ReturnType<typeof DOMPurify> | undefined;
let inert: HTMLTemplateElement | undefined;
/**
 * A sanitiser of its own with the allow-lists set once (not parsed again on every call: a stream
 * renders many times a second). It cleans in place: the HTML is parsed into an element of a
 * template's document, which is inert (no script runs, nothing loads) and made once, where
 * DOMPurify's own parse would make a new document on every call (most of a block's cost).
 */
function purifier(): ReturnType<typeof DOMPurify> {
  if (!configured) {
    configured = DOMPurify(window);
    configured.setConfig({ ALLOWED_TAGS, ALLOWED_ATTR, IN_PLACE: true });
  }
  return configured;
}

/** `html` parsed in the inert document, sanitised, then moved into a fragment of the page's document. */
function sanitized(html: string): DocumentFragment {
  inert ??= document.createElement('template');
  // An allowed element (DOMPurify refuses to clean under any other); it parses HTML as a div does.
  const root = inert.content.ownerDocument.createElement('span');
  root.innerHTML = html;
  purifier().sanitize(root);
  const fragment = document.createDocumentFragment();
  fragment.append(...root.childNodes);
  return fragment;
}

/** The sanitised DOM of a Markdown text, with safe links and copyable code blocks. */
export function markdownFragment(text: string): DocumentFragment {
  const fragment = sanitized(marked.parse(text, { async: false }));
  for (const a of fragment.querySelectorAll('a')) {
    const href = a.getAttribute('href') ?? '';
    if (!SAFE_HREF.test(href)) {
      a.removeAttribute('href');
      continue;
    }
    if (!href.startsWith('#')) {
      a.target = '_blank';
      a.rel = 'noopener noreferrer';
    }
  }
  // Task-list boxes show the state; they are not controls.
  for (const input of fragment.querySelectorAll('input')) {
    if (input.type !== 'checkbox') input.remove();
    else input.disabled = true;
  }
  // Room for the widest number of an ordered list (app.css: digits-3 and up).
  for (const ol of fragment.querySelectorAll('ol')) {
    const widest = String(Math.max(1, Number(ol.getAttribute('start') ?? '1') || 1) + ol.children.length - 1).length;
    if (widest >= 3) ol.classList.add(`digits-${Math.min(widest, 6)}`);
  }
  for (const pre of fragment.querySelectorAll('pre')) {
    const code = pre.querySelector('code');
    const lang = code?.dataset.lang ?? '';
    const block = document.createElement('div');
    block.className = 'code-block';
    const head = document.createElement('div');
    head.className = 'code-head';
    const label = document.createElement('span');
    label.className = 'code-lang';
    label.textContent = lang || 'code';
    head.append(
      label,
      codeCopyButton(() => pre.textContent ?? '', lang ? `Copy ${lang} code` : 'Copy code'),
    );
    pre.replaceWith(block);
    block.append(head, pre);
  }
  return fragment;
}
