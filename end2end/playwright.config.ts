import { defineConfig } from '@playwright/test';

// Port of the redrive server the tests start (serve.sh); override with E2E_PORT.
const port = Number(process.env.E2E_PORT ?? 3907);
// The OpenID Provider of tests/sso.spec.ts (testkit/oidc); serve.sh points `[oidc]` at it.
const oidcPort = port + 100;

const chromium = {
  // Debian's Chromium, never a downloaded browser; flags that work on these machines.
  launchOptions: {
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run',
    ],
  },
};

export default defineConfig({
  testDir: './tests',
  timeout: 60_000,
  expect: { timeout: 15_000 },
  fullyParallel: false,
  workers: 1,
  // No retries: a failure is a bug to find, not to hide.
  retries: 0,
  reporter: [['list']],
  use: {
    baseURL: `http://127.0.0.1:${port}`,
    ...chromium,
  },
  projects: [
    // Signs each test user in once and keeps the session (tests/auth.setup.ts), so the tests
    // do not trip the sign-in throttle.
    { name: 'sign-in', testMatch: /auth\.setup\.ts/ },
    { name: 'chromium', dependencies: ['sign-in'], testIgnore: /auth\.setup\.ts/ },
  ],
  webServer: [
    {
      command: `bash ./serve.sh ${port}`,
      url: `http://127.0.0.1:${port}/healthz`,
      timeout: 120_000,
      reuseExistingServer: false,
      stdout: 'pipe',
      stderr: 'pipe',
    },
    {
      // A real OpenID Provider (panva's oidc-provider) with the accounts of tests/sso.spec.ts.
      command: `node ../testkit/oidc/provider.mjs ${oidcPort} http://127.0.0.1:${port}/auth/oidc/callback`,
      url: `http://127.0.0.1:${oidcPort}/.well-known/openid-configuration`,
      timeout: 30_000,
      reuseExistingServer: false,
      stdout: 'pipe',
      stderr: 'pipe',
    },
  ],
});
