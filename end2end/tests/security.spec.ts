import { test, expect, Page } from '@playwright/test';
import { authFile, waitForIngest } from './helpers';

// The Content-Security-Policy (docs/security.md): every page loads, hydrates and works under it,
// with no violation reported, and no other site can frame redrive.
test.use({ storageState: authFile('admin') });
test.setTimeout(300_000);

/** Collects CSP violations (the DOM event, and Chromium's console report) of `page`. */
function watchCsp(page: Page): string[] {
  const violations: string[] = [];
  page.on('console', (m) => {
    if (/Content Security Policy/i.test(m.text())) violations.push(m.text());
  });
  page.on('pageerror', (e) => violations.push(`page error: ${e}`));
  return violations;
}

/** Waits for hydration; the debug wasm (20+ MiB) can take long to compile on a busy machine. */
async function hydrated(page: Page) {
  await expect(page.locator('html[data-hydrated="true"]')).toHaveCount(1, { timeout: 90_000 });
}

async function domViolations(page: Page): Promise<string[]> {
  return page.evaluate(() => (window as any).__csp ?? []);
}

test.beforeEach(async ({ page }) => {
  await page.addInitScript(() => {
    (window as any).__csp = [];
    document.addEventListener('securitypolicyviolation', (e) => {
      (window as any).__csp.push(`${e.violatedDirective}: ${e.blockedURI}`);
    });
  });
  await waitForIngest(page);
});

test('every page hydrates under the CSP without a violation', async ({ page }) => {
  const violations = watchCsp(page);
  for (const path of ['/overview', '/', '/groups', '/jobs', '/audit', '/quarantine', '/alerts']) {
    const res = await page.goto(path);
    expect(res!.status(), path).toBe(200);
    const csp = res!.headers()['content-security-policy'] ?? '';
    expect(csp, path).toContain("frame-ancestors 'none'");
    expect(csp, path).toContain("'nonce-");
    await hydrated(page);
    expect(await domViolations(page), path).toEqual([]);
  }
  // A detail page, reached by a client-side navigation of the hydrated list.
  await page.goto('/?source_topic=payments');
  await hydrated(page);
  await page.locator('tbody tr a').first().click();
  await expect(page).toHaveURL(/\/dead-letters\/\d+/);
  await expect(page.locator('h1').first()).toBeVisible();
  expect(await domViolations(page)).toEqual([]);
  expect(violations).toEqual([]);
});

test('the hydrated app works under the CSP: a filter and a server function', async ({ page }) => {
  const violations = watchCsp(page);
  await page.goto('/');
  await hydrated(page);
  await page.locator('input[name="q"]').fill('declined');
  await page.locator('form').filter({ has: page.locator('input[name="q"]') })
    .locator('button[type="submit"], input[type="submit"]').first().click();
  await expect(page).toHaveURL(/q=declined/);
  await expect(page.getByText('Payment 4712 declined', { exact: false }).first()).toBeVisible();
  // The session query is a server function the app calls from the browser.
  await expect(page.locator('.sign-out')).toContainText('admin');
  expect(await domViolations(page)).toEqual([]);
  expect(violations).toEqual([]);
});

test('another site cannot frame redrive', async ({ page, baseURL }) => {
  const violations = watchCsp(page);
  await page.setContent(`<iframe id="f" src="${baseURL}/sign-in" width="400" height="300"></iframe>`);
  // The frame is refused: it never shows the sign-in form.
  await expect.poll(() => violations.some((v) => /frame-ancestors/.test(v)), { timeout: 15_000 }).toBe(true);
  const frame = page.frames().find((f) => f !== page.mainFrame());
  if (frame) {
    expect(await frame.locator('input[name="user"]').count()).toBe(0);
  }
});
