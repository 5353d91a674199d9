import { test, expect, BrowserContext } from '@playwright/test';

// Single sign-on through a real OpenID Provider (testkit/oidc/provider.mjs, started by
// playwright.config.ts): its development login and consent pages, then back to redrive with
// the role the ID token's `groups` map to (serve.sh: redrive-admins → admin, oncall →
// operator). Each test starts from a fresh, signed-out browser context.

async function freshContext(browser: import('@playwright/test').Browser): Promise<BrowserContext> {
  const context = await browser.newContext();
  // The provider's development pages import a web font; there is no network to fetch it from.
  await context.route(/fonts\.googleapis\.com/, (route) => route.abort());
  return context;
}

async function signInAtProvider(page: import('@playwright/test').Page, login: string) {
  await page.goto('/sign-in');
  await page.getByRole('link', { name: 'Sign in with SSO' }).click();
  // The provider's login page (any password), then its consent page (first sign-in).
  await page.locator('input[name="login"]').fill(login);
  await page.locator('input[name="password"]').fill('any password');
  await page.getByRole('button', { name: 'Sign-in' }).click();
  await page.getByRole('button', { name: 'Continue' }).click();
}

test('Sign in with SSO lands signed in with the mapped role', async ({ browser }) => {
  const context = await freshContext(browser);
  const page = await context.newPage();
  await signInAtProvider(page, 'alice');
  await expect(page).toHaveURL(/\/overview$/);
  await expect(page.locator('.sign-out')).toContainText('alice (admin)');
  // A normal session: the API answers with its cookie.
  const res = await page.request.get('/api/v1/audit?action=sign_in&actor=alice');
  expect(res.status()).toBe(200);
  const body = await res.json();
  expect(body.items.length).toBeGreaterThan(0);
  expect(body.items[0].detail.method).toBe('oidc');
  await context.close();
});

test('an account whose groups map to nothing is refused with a clear page', async ({ browser }) => {
  const context = await freshContext(browser);
  const page = await context.newPage();
  const refused = page.waitForResponse((r) => r.url().includes('/auth/oidc/callback'));
  await signInAtProvider(page, 'carol');
  expect((await refused).status()).toBe(403);
  await expect(page.getByRole('heading')).toHaveText('Single sign-on did not work');
  await expect(page.getByRole('alert')).toContainText('none of your groups (contractors)');
  await expect(page.getByRole('link', { name: 'Back to the sign-in page' })).toBeVisible();
  // Not signed in.
  await page.goto('/overview');
  await expect(page).toHaveURL(/\/sign-in/);
  await context.close();
});
