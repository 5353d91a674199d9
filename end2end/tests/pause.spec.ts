import { test, expect, Page } from '@playwright/test';
import { authFile, hydrated, waitForIngest, FIXTURES } from './helpers';

// Pause, resume and cancel a replay job in the browser (docs/replay.md, "Pause, resume,
// cancel"). The job replays every fixture to a fresh topic at 1 msg/s (the relay inside
// `redrive serve` sends one record a second: the 7 fixtures take about 6 s), so it is still
// running when the operator pauses it from its page. Paused, it publishes nothing more and
// keeps its count; resumed, it finishes with every record published exactly once. A second
// job over the same records is cancelled: what it had not sent is released. Waits poll the
// page (Playwright's expect); nothing sleeps.
test.describe.configure({ mode: 'serial' });

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

/** From the list filtered to the fixtures' DLQ topic, "Replay all matching", to `target` at
 * 1 msg/s with `reason` (and per-key order off when `unordered`); returns the job page's URL. */
async function slowReplayOfAll(page: Page, target: string, reason: string, unordered = false): Promise<string> {
  await page.goto(`/?dlq_topic=${encodeURIComponent(await dlqTopic(page))}`);
  await page.getByRole('link', { name: 'Replay all matching this filter…' }).click();
  await expect(page).toHaveURL(/\/confirm\?/);
  await page.locator('form.inline-form input[name="target_topic"]').fill(target);
  await page.getByRole('button', { name: 'Count again and preview' }).click();
  await expect(page.locator('.confirm-count .count')).toHaveText(String(FIXTURES));
  await hydrated(page);
  await page.locator('input[name="rate_per_sec"]').fill('1');
  await page.locator('.confirm-form input[name="reason"]').fill(reason);
  // The order and placement options are unticked: per-key order, the producer's partition.
  const noOrder = page.getByRole('checkbox', { name: 'Publish without per-key order' });
  await expect(noOrder).not.toBeChecked();
  await expect(page.getByRole('checkbox', { name: /original partition/ })).not.toBeChecked();
  if (unordered) await noOrder.check();
  await page.getByRole('button', { name: `Confirm: replay ${FIXTURES} dead letters` }).click();
  await expect(page).toHaveURL(/\/jobs\/[0-9a-f-]{36}$/);
  await expect(page.locator('.job-total')).toHaveText(String(FIXTURES));
  return page.url();
}

test.describe('as an operator', () => {
  test.use({ storageState: authFile('operator') });

  test.beforeEach(async ({ page }) => {
    await waitForIngest(page);
    await noneWaiting(page);
  });

  test('pause a running replay with a reason, see it paused, resume it, see it finish', async ({ page }) => {
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    const target = `e2e-pause-${Date.now()}`;
    const jobUrl = await slowReplayOfAll(page, target, 'e2e: slow replay to pause');
    await hydrated(page);
    await expect(page.locator('.job-facts')).toContainText('1 msgs/s');
    await expect(page.locator('.job-order')).toHaveText(/^per key/);
    await expect(page.locator('.job-partition')).toHaveText('picked by the producer (key hash)');

    // Unique per run, so the audit row found below is this run's.
    const why = `e2e: consumer falling behind (${target})`;
    await page.locator('.pause-job input[name="reason"]').fill(why);
    await page.getByRole('button', { name: 'Pause the replay' }).click();
    await expect(page.locator('.job-status')).toHaveText('paused');
    await expect(page.getByRole('button', { name: 'Resume the replay' })).toBeVisible();
    await expect(page.getByRole('button', { name: 'Pause the replay' })).toHaveCount(0);
    // Paused means nothing more is sent: the count stays what it was, also after a reload
    // (the status is in the store, not in the page). A record already sent when the pause
    // came is still recorded as published (docs/replay.md), so the count is read once the
    // relay has let go of the job: its worker is gone (`/readyz` relay.active_jobs, which
    // counts a worker until its in-flight records are recorded).
    await expect(async () => {
      const ready = await (await page.request.get('/readyz')).json();
      expect(ready.relay.active_jobs).toBe(0);
    }).toPass({ timeout: 30_000 });
    await page.reload();
    await expect(page.locator('.job-status')).toHaveText('paused');
    const atPause = Number(await page.locator('.job-published').textContent());
    expect(atPause).toBeLessThan(FIXTURES);
    // Three more relay poll cycles (each looks for work): still nothing sent.
    const cycles = (await (await page.request.get('/readyz')).json()).relay.cycles_total;
    await expect(async () => {
      const ready = await (await page.request.get('/readyz')).json();
      expect(ready.relay.cycles_total).toBeGreaterThanOrEqual(cycles + 3);
    }).toPass({ timeout: 30_000 });
    await page.reload();
    await expect(page.locator('.job-status')).toHaveText('paused');
    await expect(page.locator('.job-published')).toHaveText(String(atPause));

    // The pause and its reason are in the audit trail, by the operator.
    await page.goto('/audit?action=pause_job');
    const row = page.locator('table.audit tbody tr', { hasText: why });
    await expect(row).toHaveCount(1);
    await expect(row).toContainText('oncall');

    await page.goto(jobUrl);
    await hydrated(page);
    await page.locator('.resume-job input[name="reason"]').fill('e2e: consumer caught up');
    await page.getByRole('button', { name: 'Resume the replay' }).click();
    // Running again (or already done, if the last records went out before the next look),
    // then finished with each record published once.
    await expect(page.locator('.job-status')).toHaveText(/^(running|finished)$/);
    await expect(page.locator('.job-status')).toHaveText('finished', { timeout: 45_000 });
    await expect(page.locator('.job-published')).toHaveText(String(FIXTURES));
    await expect(page.locator('.job-failed')).toHaveText('0');
    const job = await (await page.request.get(`/api/v1/replays/${jobUrl.split('/').pop()}`)).json();
    expect(job.published).toBe(FIXTURES);
    expect(errors, 'no script errors').toEqual([]);
  });

  test('cancel a running replay: what it had not sent is released', async ({ page }) => {
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    const target = `e2e-cancel-${Date.now()}`;
    // This one without per-key order (the confirmation page's checkbox).
    const jobUrl = await slowReplayOfAll(page, target, 'e2e: slow replay to cancel', true);
    await hydrated(page);
    await expect(page.locator('.job-order')).toHaveText(/^none/);
    await page.getByRole('button', { name: 'Cancel the replay' }).click();
    await expect(page.locator('.job-status')).toHaveText('cancelled');
    await expect(page.getByRole('button', { name: 'Cancel the replay' })).toHaveCount(0);
    await expect(page.getByRole('button', { name: 'Pause the replay' })).toHaveCount(0);
    const id = jobUrl.split('/').pop();
    const job = await (await page.request.get(`/api/v1/replays/${id}`)).json();
    expect(job.status).toBe('cancelled');
    expect(job.options).toEqual({ unordered: true });
    expect(job.cancelled).toBeGreaterThan(0);
    expect(job.published + job.cancelled).toBe(FIXTURES);
    // The released dead letters are no longer waiting in a job.
    await noneWaiting(page);
    expect(errors, 'no script errors').toEqual([]);
  });
});
