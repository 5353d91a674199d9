import { test, expect } from '@playwright/test';
import { authFile, waitForIngest } from './helpers';

// Reading needs no more than the viewer role.
test.use({ storageState: authFile('viewer') });

test.beforeEach(async ({ page }) => {
  await waitForIngest(page);
});

test('the list shows every dead letter, and a filter narrows it and stays in the URL', async ({ page }) => {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  await page.goto('/');
  await expect(page.getByText('payments').first()).toBeVisible();
  await expect(page.getByText('IllegalStateException').first()).toBeVisible();
  await expect(page.getByText('inventory').first()).toBeVisible();

  await page.locator('input[name="q"]').fill('declined');
  await page.locator('form').filter({ has: page.locator('input[name="q"]') }).locator('button[type="submit"], input[type="submit"]').first().click();
  await expect(page).toHaveURL(/q=declined/);
  await expect(page.getByText('inventory')).toHaveCount(0);
  await expect(page.getByText('Payment 4712 declined', { exact: false }).first()).toBeVisible();
  expect(errors, 'no script errors while hydrating').toEqual([]);
});

test('error groups link to their filtered list', async ({ page }) => {
  await page.goto('/groups');
  const row = page.locator('tr', { hasText: 'IllegalStateException' }).first();
  await expect(row).toContainText('3');
  await row.locator('a[href*="fingerprint="]').first().click();
  await expect(page).toHaveURL(/fingerprint=/);
  await expect(page.locator('tbody tr')).toHaveCount(3);
});

test('detail shows a binary payload as hex, null headers as null, and the raw download', async ({ page }) => {
  await page.goto('/?source_topic=inventory');
  await page.locator('tbody tr a').first().click();
  await expect(page).toHaveURL(/\/dead-letters\/\d+/);
  await expect(page.getByText('DataException').first()).toBeVisible();
  await expect(page.getByText('de ad be ef', { exact: false }).first()).toBeVisible();
  await expect(page.locator('tr', { hasText: '__connect.errors.exception.message' })).toContainText(/null/i);
  const href = await page.locator('a[href$="/raw/value"]').first().getAttribute('href');
  const raw = await page.request.get(href!);
  expect(raw.status()).toBe(200);
  expect(Buffer.from(await raw.body()).toString('hex')).toBe('000000002adeadbeefff10');
});

test('hostile markup in payload, key, error and headers renders inert', async ({ page }) => {
  await page.addInitScript(() => { (window as any).__pwned = 0; });
  await page.goto('/?source_topic=comments');
  await expect(page.getByText('<script>', { exact: false }).first()).toBeVisible();
  await page.locator('tbody tr a').first().click();
  await expect(page.getByText('onerror', { exact: false }).first()).toBeVisible();
  expect(await page.evaluate(() => (window as any).__pwned)).toBe(0);
  expect(await page.locator('img[src="x"]').count()).toBe(0);
  expect(await page.locator('script:not([src]):has-text("__pwned")').count()).toBe(0);
});

test.describe('without JavaScript', () => {
  test.use({ javaScriptEnabled: false });
  test('list, filter and detail work as plain HTML', async ({ page }) => {
    await page.goto('/?source_topic=payments');
    await expect(page.locator('tbody tr')).toHaveCount(3);
    await page.locator('tbody tr a').first().click();
    await expect(page.getByText('IllegalStateException').first()).toBeVisible();
  });
});
