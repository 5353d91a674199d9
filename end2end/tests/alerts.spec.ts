import { test, expect } from '@playwright/test';
import * as http from 'http';
import * as crypto from 'crypto';
import { authFile, hydrated, waitForIngest } from './helpers';

// The /alerts page (docs/alerts.md) against the rules serve.sh configures: `e2e-depth`
// (dlq_size over 0 on the fixture topic: firing once ingest stored the fixtures) and
// `e2e-quarantine` (nothing quarantined: ok), notifying the webhook `e2e-hook`, which is the
// real HTTP receiver below on port E2E_PORT + 1. The test button delivers a signed test
// notification to it.
const port = Number(process.env.E2E_PORT ?? 3907) + 1;
const SECRET = 'e2e-webhook-secret';

type Got = { headers: http.IncomingHttpHeaders; body: Buffer };
const received: Got[] = [];
let server: http.Server;

test.describe.configure({ mode: 'serial' });

test.beforeAll(async () => {
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
});

test.afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

function tests(): Got[] {
  return received.filter((r) => JSON.parse(r.body.toString('utf8')).event === 'test');
}

test.describe('an operator', () => {
  test.use({ storageState: authFile('operator') });

  test('sees the rule states and sends a test notification', async ({ page }) => {
    await page.goto('/');
    await waitForIngest(page);
    await expect(async () => {
      await page.goto('/alerts');
      await expect(page.locator('tr[data-rule="e2e-depth"]')).toHaveAttribute('data-state', 'firing');
    }).toPass({ timeout: 30_000 });
    await expect(page.locator('tr[data-rule="e2e-quarantine"]')).toHaveAttribute('data-state', 'ok');
    await expect(page.locator('#rule-e2e-depth li[data-event="fired"]')).toHaveCount(1);
    await hydrated(page);

    const before = tests().length;
    const row = page.locator('tr[data-notifier="e2e-hook"]');
    await row.getByRole('button', { name: 'Send a test notification' }).click();
    await expect.poll(() => tests().length, { timeout: 15_000 }).toBe(before + 1);
    const got = tests()[tests().length - 1];
    const expected = 'sha256=' + crypto.createHmac('sha256', SECRET).update(got.body).digest('hex');
    expect(got.headers['x-redrive-signature-256']).toBe(expected);
    const doc = JSON.parse(got.body.toString('utf8'));
    expect(doc.schema).toBe('redrive.alert.v1');
    expect(doc.scope).toBe('notifier=e2e-hook');

    // The delivery shows on the page (and in the audit trail).
    await expect(async () => {
      await page.goto('/alerts');
      await expect(
        row.locator('li[data-delivery="delivered"]', { hasText: 'test of test' }).first(),
      ).toBeVisible();
    }).toPass({ timeout: 15_000 });
    await page.goto('/audit?action=alert_test_notification');
    await expect(page.locator('tbody tr', { hasText: 'oncall' }).first()).toBeVisible();
  });
});

test.describe('without JavaScript, an operator', () => {
  test.use({ storageState: authFile('operator'), javaScriptEnabled: false });

  test('sends a test notification with the plain form', async ({ page }) => {
    await page.goto('/alerts');
    await expect(page.locator('tr[data-rule="e2e-depth"]')).toHaveAttribute('data-state', 'firing');
    const before = tests().length;
    await page.locator('tr[data-notifier="e2e-hook"]')
      .getByRole('button', { name: 'Send a test notification' }).click();
    await expect(page).toHaveURL(/\/alerts\?test=e2e-hook/);
    await expect(page.locator('.done-box')).toContainText('e2e-hook');
    await expect.poll(() => tests().length, { timeout: 15_000 }).toBe(before + 1);
  });
});

test.describe('a viewer', () => {
  test.use({ storageState: authFile('viewer') });

  test('sees the states but no test button', async ({ page }) => {
    await page.goto('/alerts');
    await expect(page.locator('tr[data-rule="e2e-depth"]')).toHaveAttribute('data-state', 'firing');
    await expect(page.getByRole('button', { name: 'Send a test notification' })).toHaveCount(0);
  });
});
