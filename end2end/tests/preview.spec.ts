import { test, expect, Page } from '@playwright/test';
import { createHash } from 'crypto';
import { authFile, hydrated, waitForIngest } from './helpers';

// Transform preview on the replay confirmation page (docs/replay.md, "Transform on replay" and
// "Dry run with samples"): an operator types a Rhai script, previews it, sees each target
// topic's sample before and after the script side by side and the script's error for the
// records it fails on, confirms, and finds the script's SHA-256 and what it did on the job
// page. The fixtures (testkit/src/fixtures.rs) go to their source topics: 3 JSON payment
// failures to `payments`, 1 JSON comment to `comments`, a binary Connect record to `inventory`
// and a tombstone to `user_requests` (the script fails on those two: their value is not a JSON
// object); the record without a source topic is skipped by the replay.
test.describe.configure({ mode: 'serial' });

const SCRIPT =
  'if type_of(record.json) != "map" { throw "not a JSON object"; } record.json.replayed = true; record';

/** The DLQ topic serve.sh produced the fixtures to. */
async function dlqTopic(page: Page): Promise<string> {
  const res = await page.request.get('/api/v1/dead-letters?limit=1');
  expect(res.status()).toBe(200);
  return String((await res.json()).items[0].dlq_topic);
}

/** Waits until no dead letter is waiting in a replay job (earlier specs' jobs are done). */
async function noneWaiting(page: Page) {
  await expect(async () => {
    const res = await page.request.get('/api/v1/dead-letters?status=replay_pending&limit=100');
    expect(res.status()).toBe(200);
    expect((await res.json()).items.length).toBe(0);
  }).toPass({ timeout: 60_000 });
}

/** The sample table of target topic `topic`. */
function sampleOf(page: Page, topic: string) {
  return page
    .locator('section.sample h3', { hasText: new RegExp(`^${topic}$`) })
    .locator('xpath=following-sibling::table[1]');
}

test.describe('as an operator', () => {
  test.use({ storageState: authFile('operator') });

  test('preview a transform per target with its errors, confirm, see the script hash on the job', async ({ page }) => {
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await waitForIngest(page);
    await noneWaiting(page);
    await page.goto(`/?dlq_topic=${encodeURIComponent(await dlqTopic(page))}`);
    await page.getByRole('link', { name: 'Replay all matching this filter…' }).click();
    await expect(page).toHaveURL(/\/confirm\?/);
    // Without a script the sample is the records as they will be sent, one column.
    await expect(page.locator('section.sample th', { hasText: 'Record as it will be sent' }).first()).toBeVisible();
    await expect(page.locator('section.sample th', { hasText: 'After the transform' })).toHaveCount(0);

    await page.locator('textarea[name="transform"]').fill(SCRIPT);
    await page.getByRole('button', { name: 'Count again and preview' }).click();
    await expect(page).toHaveURL(/transform=/);
    await expect(page.locator('.transform-error')).toHaveCount(0);
    await expect(page.locator('textarea[name="transform"]')).toHaveValue(SCRIPT);
    const sha = createHash('sha256').update(SCRIPT).digest('hex');
    await expect(page.locator('section.sample')).toContainText(`Transform script SHA-256: ${sha}.`);

    // Before and after, side by side, for each target topic.
    const payments = sampleOf(page, 'payments');
    await expect(payments.locator('thead th')).toHaveText(['Dead letter', 'Before', 'After the transform']);
    const paid = payments.locator('tbody tr.sample-publish');
    await expect(paid).toHaveCount(3);
    for (const row of await paid.all()) {
      await expect(row.locator('td').nth(1)).toContainText('"currency":"EUR"');
      await expect(row.locator('td').nth(1)).not.toContainText('replayed');
      await expect(row.locator('td').nth(2)).toContainText('"replayed":true');
    }
    await expect(sampleOf(page, 'comments').locator('tbody tr.sample-publish')).toHaveCount(1);
    // The records the script fails on: the error, per record, and that nothing is sent.
    for (const topic of ['inventory', 'user_requests']) {
      const failed = sampleOf(page, topic).locator('tbody tr.sample-error');
      await expect(failed).toHaveCount(1);
      await expect(failed.locator('td').nth(2)).toContainText('not a JSON object');
      await expect(failed.locator('td').nth(2)).toContainText('nothing is published for this record');
    }
    // Looking queued nothing.
    await noneWaiting(page);

    await hydrated(page);
    await expect(page.locator('.confirm-form')).toContainText('With the transform script previewed below');
    const why = `e2e: transform preview ${Date.now()}`;
    await page.locator('.confirm-form input[name="reason"]').fill(why);
    await page.getByRole('button', { name: /^Confirm: replay 6 dead letters$/ }).click();
    await expect(page).toHaveURL(/\/jobs\/[0-9a-f-]{36}$/);
    await expect(page.locator('.transform-sha256')).toHaveText(sha);
    await expect(page.locator('.job-status')).toHaveText('finished', { timeout: 45_000 });
    await expect(page.locator('.job-total')).toHaveText('6');
    await expect(page.locator('.job-published')).toHaveText('4');
    await expect(page.locator('.job-failed')).toHaveText('2');
    await expect(page.locator('.transform-counts')).toContainText(
      '4 transformed and published, 0 skipped by the script, 2 failed by the script',
    );
    // The audit row carries the same hash.
    const audit = await (await page.request.get('/api/v1/audit?action=replay&limit=100')).json();
    const row = audit.items.find((a: { reason?: string }) => a.reason === why);
    expect(row, 'the replay audit row').toBeTruthy();
    expect(JSON.stringify(row.detail)).toContain(sha);
    expect(errors, 'no script errors').toEqual([]);
  });
});
