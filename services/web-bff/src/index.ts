export { createWebBff, SERVICE_NAME, type WebBff, type WebBffDeps } from './create-web-bff.ts';
export { readWebBffConfig, webBffConfigSchema, type WebBffConfig } from './config.ts';
export { createTokenStore, generateToken, hashToken, loadTokenStore, parseTokenEntries, type TokenStore } from './auth/token-store.ts';
