import { test, expect, Page } from '@playwright/test';
import { authFile, hydrated, waitForIngest } from './helpers';

// Edit and replay in the browser (docs/replay.md, "Edit and replay"): an operator opens a
// payment failure, edits its value (the amount as a number instead of a string), sees an
// invalid edit refused with its message while the typed text stays, saves and replays the
// edit, watches the one-record job finish, and finds the version and its diff on the detail
// page. The relay inside `redrive serve` publishes to the record's source topic, `payments`.
test.describe.configure({ mode: 'serial' });

/** A Spring payment failure that is live and not waiting in a replay job (earlier specs
 * replay some of them): its id. */
async function editablePayment(page: Page): Promise<string> {
  let id = '';
  await expect(async () => {
    const res = await page.request.get('/api/v1/dead-letters?source_topic=payments&limit=100');
    expect(res.status()).toBe(200);
    const body = await res.json();
    const ok = body.items.filter(
      (d: { status: string }) => d.status !== 'replay_pending' && d.status !== 'deleted',
    );
    expect(ok.length).toBeGreaterThan(0);
    id = String(ok[ok.length - 1].id);
  }).toPass({ timeout: 60_000 });
  return id;
}

test.describe('as an operator', () => {
  test.use({ storageState: authFile('operator') });

  test('edit a value, replay it, see the version and its diff', async ({ page }) => {
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await waitForIngest(page);
    const id = await editablePayment(page);

    await page.goto(`/dead-letters/${id}`);
    await hydrated(page);
    await page.getByRole('link', { name: 'Edit and replay…' }).click();
    await expect(page).toHaveURL(new RegExp(`/dead-letters/${id}/edit$`));
    await hydrated(page);

    const value = page.locator('textarea[name="value"]');
    const original = await value.inputValue();
    expect(original).toContain('"amount":"12.50"');
    await expect(page.locator('select[name="value_as"]')).toHaveValue('json');

    // Invalid JSON is refused with a clear message; what was typed stays in the form.
    await value.fill('{"amount": 12,5}');
    const refused = page.waitForResponse((r) => r.url().endsWith('/api/ui/edit'));
    await page.getByRole('button', { name: /^Save as version/ }).click();
    // A refusal, not a server error (app/src/refusal.rs).
    expect((await refused).status()).toBe(422);
    await expect(page.locator('.error-box')).toContainText('not valid JSON');
    await expect(value).toHaveValue('{"amount": 12,5}');

    // The fix, saved and replayed in one go.
    const fixed = original.replace('"amount":"12.50"', '"amount":12.5');
    await value.fill(fixed);
    await page.locator('input[name="reason"]').fill('e2e: amount as a number');
    await page.getByRole('button', { name: 'Save and replay' }).click();
    await expect(page).toHaveURL(/\/jobs\//);
    await expect(page.locator('.job-total')).toHaveText('1');
    await expect(page.locator('.job-status')).toHaveText('finished', { timeout: 45_000 });
    await expect(page.locator('.job-published')).toHaveText('1');

    // The detail page: the version, what changed, and that a replay publishes it.
    await page.goto(`/dead-letters/${id}`);
    const versions = page.locator('#versions');
    await expect(versions).toContainText('Version 1');
    await expect(versions).toContainText('published by a replay');
    await expect(versions).toContainText('Reason: e2e: amount as a number');
    const diff = versions.locator('pre.diff').first();
    await expect(diff).toContainText('- ' + original.trim());
    await expect(diff).toContainText('+ ' + fixed.trim());
    // The original is still what the page shows as the record received.
    await expect(page.locator('body')).toContainText('"12.50"');
    expect(errors).toEqual([]);
  });
});
