import { test, expect, Page } from '@playwright/test';
import { authFile, hydrated } from './helpers';

// The admin page /admin/users (docs/access.md): an admin adds a user, creates an API token for
// them (shown once on its own page), uses it, and revokes it; then the token is refused.
// Once hydrated, and once with JavaScript off (plain forms).

async function addUserAndToken(page: Page, name: string) {
  await page.goto('/admin/users');
  await expect(page.locator('h1')).toHaveText('Users and API tokens');
  const add = page.locator('form.user-add');
  await add.locator('input[name="name"]').fill(name);
  await add.locator('select[name="role"]').selectOption('operator');
  await add.locator('input[name="password"]').fill(`${name}-password`);
  await add.getByRole('button', { name: 'Add user' }).click();
  await expect(page.locator('.done-box')).toContainText('The user was added.');
  const row = page.locator(`tr[data-user="${name}"]`);
  await expect(row).toHaveAttribute('data-state', 'active');
  await expect(row.locator('select[name="role"]')).toHaveValue('operator');

  // A token for them, read-only, expiring in 7 days: shown once on its own page.
  const form = page.locator('form.token-new');
  await form.locator('select[name="user"]').selectOption(name);
  await form.locator('input[name="name"]').fill(`${name}-ci`);
  await form.locator('select[name="expires"]').selectOption('7d');
  await form.locator('select[name="scope"]').selectOption('read_only');
  await form.getByRole('button', { name: 'Create token' }).click();
  await expect(page.locator('h1')).toHaveText('New API token');
  const shown = page.locator('#new-token');
  const token = (await shown.textContent())?.trim() ?? '';
  expect(token).toMatch(/^rdv_[A-Za-z0-9_-]{43}$/);
  const id = await shown.getAttribute('data-token-id');
  expect(id).toBeTruthy();
  return { token, id: id as string };
}

async function revoke(page: Page, name: string, id: string, token: string) {
  // The token reads (it is read-only) ...
  const ok = await page.request.get('/api/v1/dead-letters?limit=1', {
    headers: { Authorization: `Bearer ${token}` },
  });
  expect(ok.status()).toBe(200);

  // ... is listed with its user, scope and expiry, and is revoked from the page.
  await page.goto('/admin/users');
  const row = page.locator(`table.tokens tr[data-token="${id}"]`);
  await expect(row).toHaveAttribute('data-state', 'active');
  await expect(row).toContainText(name);
  await expect(row).toContainText('read-only');
  await row.getByRole('button', { name: 'Revoke' }).click();
  await expect(page.locator('.done-box')).toContainText('The API token was revoked.');
  await expect(page.locator(`table.tokens tr[data-token="${id}"]`)).toHaveAttribute(
    'data-state',
    'revoked',
  );

  const refused = await page.request.get('/api/v1/dead-letters?limit=1', {
    headers: { Authorization: `Bearer ${token}` },
  });
  expect(refused.status()).toBe(401);
}

test.describe('admin page, hydrated', () => {
  test.use({ storageState: authFile('admin') });

  test('adds a user, creates a token for them and revokes it', async ({ page }) => {
    await page.goto('/admin/users');
    await hydrated(page);
    const name = `e2e-user-${Date.now()}`;
    const { token, id } = await addUserAndToken(page, name);
    await revoke(page, name, id, token);
  });
});

test.describe('admin page, without JavaScript', () => {
  test.use({ storageState: authFile('admin'), javaScriptEnabled: false });

  test('adds a user, creates a token for them and revokes it', async ({ page }) => {
    const name = `e2e-plain-${Date.now()}`;
    const { token, id } = await addUserAndToken(page, name);
    await revoke(page, name, id, token);
  });
});

test.describe('admin page, as an operator', () => {
  test.use({ storageState: authFile('operator') });

  test('is refused', async ({ page }) => {
    const res = await page.goto('/admin/users');
    expect(res?.status()).toBe(403);
    await expect(page.locator('.error-box')).toContainText('manage_users');
    await expect(page.locator('nav a[href="/admin/users"]')).toHaveCount(0);
  });
});
