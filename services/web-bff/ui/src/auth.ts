/**
 * The bearer token. `bedrock` prints `http://host:port/?token=…`: the token is taken from the
 * query string once, kept in localStorage, and removed from the address bar (and history) so it is
 * not shared by copying the URL. A link never silently replaces a token already kept: the page asks
 * (main.tsx; docs/web-ui.md).
 */
const KEY = 'bedrock.token';

/**
 * Takes the link's token out of the address bar: saved when none is kept; returned, unsaved, when
 * another one is, for the page to ask about (the kept token stays unless the person agrees).
 * Anyone can send a link `/c/<id>?token=…` with a token of their own, and a page signed in as
 * them would show their conversations and take what the person types.
 */
export function takeTokenFromUrl(): string | undefined {
  const url = new URL(location.href);
  const token = url.searchParams.get('token')?.trim();
  if (token === undefined) return undefined;
  url.searchParams.delete('token');
  history.replaceState(history.state, '', url.pathname + url.search + url.hash);
  if (!token) return undefined;
  const kept = storedToken();
  if (kept === undefined) {
    saveToken(token);
    return undefined;
  }
  return kept === token ? undefined : token;
}

export function storedToken(): string | undefined {
  try {
    return localStorage.getItem(KEY) || undefined;
  } catch {
    return undefined;
  }
}

export function saveToken(token: string): void {
  localStorage.setItem(KEY, token);
}

export function forgetToken(): void {
  localStorage.removeItem(KEY);
}
