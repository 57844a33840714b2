/**
 * The bearer token. `bedrock` prints `http://host:port/?token=…`: the token is taken from the
 * query string once, kept in localStorage, and removed from the address bar (and history) so
 * it is not shared by copying the URL.
 */
const KEY = 'bedrock.token';

export function takeTokenFromUrl(): void {
  const url = new URL(location.href);
  const token = url.searchParams.get('token');
  if (token === null) return;
  if (token.trim()) saveToken(token.trim());
  url.searchParams.delete('token');
  history.replaceState(history.state, '', url.pathname + url.search + url.hash);
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
