/**
 * The Bedrock web UI: sign-in with the bearer token, the conversation list and one
 * conversation at a time, with client-side routes `/` and `/c/<id>` (web-bff serves
 * index.html for both).
 */
import { createApi } from './api.ts';
import { forgetToken, saveToken, storedToken, takeTokenFromUrl } from './auth.ts';
import { conversationView, type View } from './conversation-view.ts';
import { h, replace } from './dom.ts';
import { Sidebar } from './sidebar.ts';

const root = document.getElementById('app')!;
const api = createApi();
let view: View | undefined;
let sidebar: Sidebar | undefined;
let main: HTMLElement | undefined;
/** The sign-in form is showing: later refusals of calls already in flight add nothing. */
let signingIn = false;

function signIn(message?: string): void {
  signingIn = true;
  view?.dispose();
  view = undefined;
  sidebar = undefined;
  main = undefined;
  const input = h('input', { id: 'token', type: 'password', required: true, autocomplete: 'off', spellcheck: 'false' });
  const form = h(
    'form',
    { class: 'sign-in' },
    h('h1', {}, 'Bedrock'),
    h('p', {}, 'Paste your access token. ', h('code', {}, 'npm start'), ' prints a link that includes it.'),
    message ? h('p', { class: 'form-error', role: 'alert' }, message) : null,
    h('label', { for: 'token' }, 'Token'),
    input,
    h('button', { type: 'submit', class: 'primary' }, 'Sign in'),
  );
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    saveToken(input.value.trim());
    shell();
  });
  replace(root, h('main', { class: 'sign-in-page' }, form));
  input.focus();
}

function authFailed(message: string): void {
  if (signingIn) return;
  forgetToken();
  signIn(`Signed out: ${message}`);
}

function navigate(path: string): void {
  if (location.pathname !== path) history.pushState(null, '', path);
  route();
}

function shell(): void {
  signingIn = false;
  sidebar = new Sidebar({ api, authFailed, navigate });
  main = h('main', { class: 'main', id: 'main' });
  const signOut = h('button', { type: 'button', class: 'link', onclick: () => authFailed('you signed out') }, 'Sign out');
  replace(
    root,
    h('a', { class: 'skip-link', href: '#main' }, 'Skip to conversation'),
    h(
      'header',
      { class: 'topbar' },
      h('a', { href: '/', 'data-link': true, class: 'brand' }, 'Bedrock'),
      h('span', { class: 'spacer' }),
      signOut,
    ),
    h('div', { class: 'layout' }, sidebar.el, main),
  );
  void sidebar.refresh();
  route();
}

function route(): void {
  if (!sidebar || !main) return;
  view?.dispose();
  view = undefined;
  const m = /^\/c\/([^/]+)\/?$/.exec(location.pathname);
  if (m) {
    const id = decodeURIComponent(m[1]!);
    sidebar.select(id);
    view = conversationView({ api, authFailed, listChanged: () => void sidebar?.refresh(), navigate }, id);
    replace(main, view.el);
  } else {
    sidebar.select('');
    document.title = 'Bedrock';
    replace(
      main,
      h(
        'div',
        { class: 'welcome' },
        h('h1', {}, 'Welcome to Bedrock'),
        h('p', {}, 'Pick a conversation on the left, or start a new one in a working directory.'),
        h('p', {}, 'New conversations start in Restricted mode: the agent can read but not change anything until you approve its request.'),
      ),
    );
  }
}

// In-app links navigate without reloading.
document.addEventListener('click', (ev) => {
  const a = (ev.target as Element | null)?.closest?.('a[data-link]');
  if (!(a instanceof HTMLAnchorElement) || ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey) return;
  ev.preventDefault();
  navigate(a.pathname);
});
window.addEventListener('popstate', route);

takeTokenFromUrl();
if (storedToken()) shell();
else signIn();
