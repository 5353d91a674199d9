import { expect, Page } from '@playwright/test';
import * as path from 'path';

// The users serve.sh creates.
export const USERS = {
  admin: { name: 'admin', password: 'e2e-admin-password', role: 'admin' },
  operator: { name: 'oncall', password: 'e2e-operator-password', role: 'operator' },
  viewer: { name: 'watcher', password: 'e2e-viewer-password', role: 'viewer' },
} as const;
export type Who = keyof typeof USERS;

/** Where auth.setup.ts keeps each user's signed-in browser state (cookies). */
export function authFile(who: Who): string {
  return path.join(__dirname, '..', 'test-results', '.auth', `${who}.json`);
}

/** Signs `who` in through the sign-in page, as a person would. */
export async function signIn(page: Page, who: Who) {
  const u = USERS[who];
  await page.goto('/sign-in');
  await page.locator('input[name="user"]').fill(u.name);
  await page.locator('input[name="password"]').fill(u.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page).not.toHaveURL(/\/sign-in/);
  await expect(page.locator('.sign-out')).toContainText(`${u.name} (${u.role})`);
}

// The fixture set (testkit/src/fixtures.rs): 3 Spring payment failures, 1 Connect converter
// failure with a binary payload, 1 seed-convention tombstone, 1 hostile-markup record, 1 with
// no headers. serve.sh produced them to a fresh topic; ingest stores them within seconds.
export const FIXTURES = 7;

/** Waits until ingest has stored every fixture (the page's session cookie authenticates). */
export async function waitForIngest(page: Page) {
  await expect(async () => {
    const res = await page.request.get('/api/v1/dead-letters?limit=100');
    expect(res.status()).toBe(200);
    const body = await res.json();
    expect(body.items.length).toBe(FIXTURES);
  }).toPass({ timeout: 60_000 });
}

/** Waits until the page is hydrated (interactive). */
export async function hydrated(page: Page) {
  await expect(page.locator('html[data-hydrated="true"]')).toHaveCount(1);
}
