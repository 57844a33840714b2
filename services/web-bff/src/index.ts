export { startWebBff, SERVICE_NAME, type RunningWebBff, type WebBffDeps } from './create-web-bff.ts';
export { readWebBffConfig, webBffEnv, type WebBffConfig } from './config.ts';
export { createTokenStore, generateToken, hashToken, loadTokenStore, parseTokenEntries, type TokenStore } from './auth/token-store.ts';
